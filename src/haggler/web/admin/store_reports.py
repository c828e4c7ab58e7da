"""The store's own figures: its chats, their transcripts, its deals and how well it sells.

Pure reads over a connection (and the catalog, which knows list prices, floors and what each
extra costs). Money stays in integer cents here; ``to_json`` turns it into numbers the way
``haggler deals --json`` always has (``649.99``, ``579``).

Definitions, used by the dashboard and the commands alike:

* a chat is **live** while it is open and its last message is younger than the idle TTL; an open
  chat past it is **idle** (the next sweep or message closes it as expired);
* the **agreement rate** is agreed chats / closed chats: of the chats that have ended, the share
  that ended in a deal. Open chats are left out, since they may still agree;
* a deal's **discount** is (list price − agreed price) / list price, extras not counted; the
  **average discount** is the mean of the deals' discounts (each deal weighs the same);
* a deal's **margin over floor** is agreed price − floor − what the extras given cost the store
  (``Product.extras_cost``): what the deal earned above the least the owner would take;
* **deals per day** are counted by the UTC date the deal was made on.

A deal whose product has left the catalog keeps its price but has no list price, discount or
margin (None), and is left out of the averages.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Sequence

from sqlalchemy import Connection, and_, func, select

from haggler.orders import Order, count_orders, list_orders
from haggler.catalog import Catalog
from haggler.engine import OutcomeKind
from haggler.money import to_decimal_number
from haggler.storage import chats as repo
from haggler.storage.schema import chats, deals, messages
from haggler.web.admin.paging import EVERYTHING, Page, Window

#: Every way a closed chat can end, in the order the dashboard lists them.
OUTCOMES = tuple(kind.value for kind in OutcomeKind)
AGREED = OutcomeKind.AGREED.value
#: The lower edges, in percent, of the discount histogram's buckets; the last is open-ended.
DISCOUNT_EDGES = (0, 5, 10, 15, 20, 25, 30, 35)
#: Days the deals-per-day series covers by default, today (UTC) the last.
DEFAULT_DAYS = 14


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else round(fraction * 100, 2)


def _money(cents: int | None) -> int | float | None:
    return None if cents is None else to_decimal_number(cents)


# -- chats ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatSummary:
    id: str
    product_id: str
    product_name: str | None
    #: live | idle | closed (see the module's definitions)
    state: str
    outcome: str | None
    started_at: datetime
    last_activity_at: datetime
    #: Every message stored: the merchant's and the shopper's.
    messages: int
    deal_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "product_id": self.product_id, "product_name": self.product_name,
                "state": self.state, "outcome": self.outcome, "started_at": self.started_at.isoformat(),
                "last_activity_at": self.last_activity_at.isoformat(), "messages": self.messages,
                "deal_id": self.deal_id}


def _chat_summary(catalog: Catalog, chat: Any, live_since: datetime, messages: int,
                  deal_id: str | None) -> ChatSummary:
    """A stored chat (``ChatRow``, or a row of the chats page) with its product's name and its
    state: closed; or open, and live while its last activity is after ``live_since``, else idle."""
    product = catalog.product(chat.product_id)
    state = "closed" if chat.status != "open" else "live" if chat.last_activity_at > live_since else "idle"
    return ChatSummary(chat.id, chat.product_id, product.name if product else None, state, chat.outcome,
                       chat.created_at, chat.last_activity_at, messages, deal_id)


def chats_page(conn: Connection, catalog: Catalog, *, now: datetime, idle_ttl: timedelta, live_only: bool = False,
               window: Window = EVERYTHING) -> Page[ChatSummary]:
    """Chats, the most recently active first; ``live_only``: only the live ones."""
    live_since = now - idle_ttl
    where = and_(chats.c.status == "open", chats.c.last_activity_at > live_since) if live_only else None
    count = select(func.count()).select_from(chats)
    page = (select(chats.c.id, chats.c.product_id, chats.c.status, chats.c.outcome, chats.c.created_at,
                   chats.c.last_activity_at, deals.c.id.label("deal_id"))
            .outerjoin(deals, deals.c.chat_id == chats.c.id)
            .order_by(chats.c.last_activity_at.desc(), chats.c.id)
            .offset(window.offset or None).limit(window.limit))
    if where is not None:
        count, page = count.where(where), page.where(where)
    # The window's chats first, then their messages counted: the messages table is the largest,
    # and only these few chats' entries of its primary key are read.
    shown = page.subquery("shown")
    query = (select(shown, select(func.count()).where(messages.c.chat_id == shown.c.id).scalar_subquery().label("n"))
             .order_by(shown.c.last_activity_at.desc(), shown.c.id))
    rows = [_chat_summary(catalog, r, live_since, r.n, r.deal_id) for r in conn.execute(query)]
    return Page(rows, conn.execute(count).scalar_one(), window)


@dataclass(frozen=True, slots=True)
class Transcript:
    chat: ChatSummary
    messages: tuple[repo.MessageRow, ...]
    deal: DealReport | None

    def to_json(self) -> dict[str, Any]:
        return {**self.chat.to_json(), "transcript": [_message_json(m) for m in self.messages],
                "deal": self.deal.to_json() if self.deal else None}


def _message_json(message: repo.MessageRow) -> dict[str, Any]:
    return {"seq": message.seq, "speaker": message.speaker, "text": message.text, "action": message.action,
            "price": _money(message.price_cents), "currency": message.currency, "extras": list(message.extras),
            "at": message.created_at.isoformat()}


def transcript(conn: Connection, catalog: Catalog, chat_id: str, *, now: datetime,
               idle_ttl: timedelta) -> Transcript | None:
    """One chat with every message, in order, and its deal; None for an unknown chat."""
    chat = repo.get_chat(conn, chat_id)
    if chat is None:
        return None
    found = repo.list_messages(conn, chat_id)
    deal = repo.deal_for_chat(conn, chat_id)
    return Transcript(_chat_summary(catalog, chat, now - idle_ttl, len(found), deal.id if deal else None),
                      tuple(found), deal_report(deal, catalog) if deal else None)


# -- deals ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DealReport:
    """A deal with what the owner knows about it; the list price, floor and extras' cost are
    None when its product is no longer in the catalog."""

    id: str
    chat_id: str
    product_id: str
    product_name: str | None
    price_cents: int
    currency: str
    extras: tuple[str, ...]
    created_at: datetime
    list_price_cents: int | None
    floor_cents: int | None
    extras_cost_cents: int | None

    @property
    def discount(self) -> float | None:
        """(list − price) / list, as a fraction."""
        if self.list_price_cents is None:
            return None
        return (self.list_price_cents - self.price_cents) / self.list_price_cents

    @property
    def margin_cents(self) -> int | None:
        """price − floor − extras' cost."""
        if self.floor_cents is None or self.extras_cost_cents is None:
            return None
        return self.price_cents - self.floor_cents - self.extras_cost_cents

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "session_id": self.chat_id, "product_id": self.product_id,
                "product_name": self.product_name, "list_price": _money(self.list_price_cents),
                "price": to_decimal_number(self.price_cents), "currency": self.currency,
                "discount_percent": _percent(self.discount), "extras": list(self.extras),
                "extras_cost": _money(self.extras_cost_cents), "floor": _money(self.floor_cents),
                "margin_over_floor": _money(self.margin_cents), "created_at": self.created_at.isoformat()}


def deal_report(deal: repo.DealRow, catalog: Catalog) -> DealReport:
    product = catalog.product(deal.product_id)
    if product is None:
        return DealReport(deal.id, deal.chat_id, deal.product_id, None, deal.price_cents, deal.currency, deal.extras,
                          deal.created_at, None, None, None)
    return DealReport(deal.id, deal.chat_id, deal.product_id, product.name, deal.price_cents, deal.currency,
                      deal.extras, deal.created_at, product.list_price_cents, product.floor_cents,
                      product.extras_cost(deal.extras))


def deals_page(conn: Connection, catalog: Catalog, window: Window = EVERYTHING) -> Page[DealReport]:
    """Deals, newest first."""
    rows = repo.list_deals(conn, limit=window.limit, offset=window.offset)
    total = conn.execute(select(func.count()).select_from(deals)).scalar_one()
    return Page([deal_report(row, catalog) for row in rows], total, window)


# -- how well the store sells --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bucket:
    """Deals whose discount is at least ``low`` and below ``high`` percent (None: open-ended)."""

    low: int | None
    high: int | None
    deals: int

    @property
    def label(self) -> str:
        if self.low is None:
            return "above list"
        return f"{self.low}%+" if self.high is None else f"{self.low}–{self.high}%"

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "from_percent": self.low, "to_percent": self.high, "deals": self.deals}


@dataclass(frozen=True, slots=True)
class Day:
    day: date
    deals: int
    revenue_cents: int

    def to_json(self) -> dict[str, Any]:
        return {"date": self.day.isoformat(), "deals": self.deals, "revenue": to_decimal_number(self.revenue_cents)}


@dataclass(frozen=True, slots=True)
class Summary:
    chats: int
    live_chats: int
    closed_chats: int
    #: Closed chats by outcome, every outcome present (0 when none).
    outcomes: dict[str, int]
    deals: int
    revenue_cents: int
    margin_cents: int
    currency: str
    agreement_rate: float | None
    average_discount: float | None
    discounts: tuple[Bucket, ...]
    per_day: tuple[Day, ...]

    def to_json(self) -> dict[str, Any]:
        return {"chats": {"total": self.chats, "live": self.live_chats, "closed": self.closed_chats,
                          "outcomes": dict(self.outcomes)},
                "deals": self.deals, "revenue": to_decimal_number(self.revenue_cents),
                "margin_over_floor": to_decimal_number(self.margin_cents), "currency": self.currency,
                "agreement_rate": None if self.agreement_rate is None else round(self.agreement_rate, 4),
                "average_discount_percent": _percent(self.average_discount),
                "discount_distribution": [bucket.to_json() for bucket in self.discounts],
                "deals_per_day": [day.to_json() for day in self.per_day]}


def all_deals(conn: Connection, catalog: Catalog) -> list[DealReport]:
    """Every deal, newest first: what ``summary`` and ``product_stats`` read, so a caller that
    wants both (or the latest deals beside them) reads the deals once and hands them to each."""
    return [deal_report(row, catalog) for row in repo.list_deals(conn)]


def discount_buckets(reports: Sequence[DealReport]) -> tuple[Bucket, ...]:
    """The histogram of discounts over ``DISCOUNT_EDGES``; an "above list" bucket first only when
    a deal was made above its list price. Integer arithmetic, so a deal of exactly 5% off is in
    5–10%, never in 0–5% by a rounding error."""
    counts: Counter[int | None] = Counter()
    for deal in reports:
        if deal.list_price_cents is None:
            continue
        off = deal.list_price_cents - deal.price_cents
        edge = None if off < 0 else max(e for e in DISCOUNT_EDGES if off * 100 >= e * deal.list_price_cents)
        counts[edge] += 1
    highs = (*DISCOUNT_EDGES[1:], None)
    buckets = tuple(Bucket(low, high, counts[low]) for low, high in zip(DISCOUNT_EDGES, highs, strict=True))
    return ((Bucket(None, 0, counts[None]),) if counts[None] else ()) + buckets


def deals_per_day(reports: Sequence[DealReport], today: date, days: int) -> tuple[Day, ...]:
    """The ``days`` UTC dates up to ``today``, oldest first, each with its deals (0 on a day without)."""
    first = today - timedelta(days=days - 1)
    counts: Counter[date] = Counter()
    revenue: Counter[date] = Counter()
    for deal in reports:
        day = deal.created_at.date()  # created_at is UTC (UTCDateTime)
        if first <= day <= today:
            counts[day] += 1
            revenue[day] += deal.price_cents
    return tuple(Day(first + timedelta(days=n), counts[first + timedelta(days=n)], revenue[first + timedelta(days=n)])
                 for n in range(days))


def _average_discount(reports: Sequence[DealReport]) -> float | None:
    discounts = [d.discount for d in reports if d.discount is not None]
    return sum(discounts) / len(discounts) if discounts else None


@dataclass(frozen=True, slots=True)
class ChatCounts:
    """Chats counted by status and outcome, with their shopper turns: what the overview and
    ``/metrics`` both report, and the one definition of the agreement rate."""

    #: (status, outcome or None) → (chats, shopper turns)
    by_state: dict[tuple[str, str | None], tuple[int, int]]

    @property
    def chats(self) -> int:
        return sum(n for n, _ in self.by_state.values())

    @property
    def turns(self) -> int:
        return sum(turns for _, turns in self.by_state.values())

    @property
    def closed(self) -> int:
        return sum(n for (status, _), (n, _) in self.by_state.items() if status == "closed")

    @property
    def outcomes(self) -> dict[str, int]:
        """Closed chats by outcome, every known outcome present."""
        outcomes = dict.fromkeys(OUTCOMES, 0)
        for (status, outcome), (n, _) in self.by_state.items():
            if status == "closed" and outcome is not None:
                outcomes[outcome] = outcomes.get(outcome, 0) + n
        return outcomes

    @property
    def agreement_rate(self) -> float | None:
        """Agreed chats / closed chats; open chats are left out (they may still agree)."""
        return _rate(self.outcomes[AGREED], self.closed)


def chat_counts(conn: Connection) -> ChatCounts:
    rows = conn.execute(select(chats.c.status, chats.c.outcome, func.count(),
                               func.coalesce(func.sum(chats.c.shopper_messages), 0))
                        .group_by(chats.c.status, chats.c.outcome)).all()
    return ChatCounts({(status, outcome): (n, turns) for status, outcome, n, turns in rows})


def summary(conn: Connection, catalog: Catalog, *, now: datetime, idle_ttl: timedelta,
            days: int = DEFAULT_DAYS, reports: Sequence[DealReport] | None = None) -> Summary:
    """The overview's numbers and chart series; ``reports``: ``all_deals``, when already read."""
    counts = chat_counts(conn)
    live = conn.execute(select(func.count()).select_from(chats).where(
        chats.c.status == "open", chats.c.last_activity_at > now - idle_ttl)).scalar_one()
    if reports is None:
        reports = all_deals(conn, catalog)
    return Summary(
        chats=counts.chats, live_chats=live, closed_chats=counts.closed, outcomes=counts.outcomes,
        deals=len(reports), revenue_cents=sum(d.price_cents for d in reports),
        margin_cents=sum(d.margin_cents for d in reports if d.margin_cents is not None),
        currency=catalog.store.currency, agreement_rate=counts.agreement_rate,
        average_discount=_average_discount(reports), discounts=discount_buckets(reports),
        per_day=deals_per_day(reports, now.date(), days))


@dataclass(frozen=True, slots=True)
class ProductStats:
    product_id: str
    name: str | None
    list_price_cents: int | None
    currency: str
    chats: int
    closed_chats: int
    agreed_chats: int
    deals: int
    revenue_cents: int
    average_discount: float | None
    margin_cents: int | None

    @property
    def agreement_rate(self) -> float | None:
        return _rate(self.agreed_chats, self.closed_chats)

    @property
    def average_price_cents(self) -> int | None:
        return round(self.revenue_cents / self.deals) if self.deals else None

    def to_json(self) -> dict[str, Any]:
        return {"product_id": self.product_id, "name": self.name, "list_price": _money(self.list_price_cents),
                "currency": self.currency, "chats": self.chats, "closed_chats": self.closed_chats,
                "agreed_chats": self.agreed_chats,
                "agreement_rate": None if self.agreement_rate is None else round(self.agreement_rate, 4),
                "deals": self.deals, "revenue": to_decimal_number(self.revenue_cents),
                "average_price": _money(self.average_price_cents),
                "average_discount_percent": _percent(self.average_discount),
                "margin_over_floor": _money(self.margin_cents)}


def product_stats(conn: Connection, catalog: Catalog,
                  reports: Sequence[DealReport] | None = None) -> list[ProductStats]:
    """Every catalog product in catalog order, then any product that has chats but has left the
    catalog (by id); ``reports``: ``all_deals``, when already read."""
    counts: dict[str, Counter[str]] = {}
    for product_id, status, outcome, n in conn.execute(
            select(chats.c.product_id, chats.c.status, chats.c.outcome, func.count())
            .group_by(chats.c.product_id, chats.c.status, chats.c.outcome)):
        tally = counts.setdefault(product_id, Counter())
        tally["chats"] += n
        if status == "closed":
            tally["closed"] += n
            tally["agreed"] += n if outcome == AGREED else 0
    by_product: dict[str, list[DealReport]] = {}
    for deal in all_deals(conn, catalog) if reports is None else reports:
        by_product.setdefault(deal.product_id, []).append(deal)
    ids = [p.id for p in catalog.products]
    ids += sorted((set(counts) | set(by_product)) - set(ids))
    out = []
    for product_id in ids:
        product = catalog.product(product_id)
        tally = counts.get(product_id, Counter())
        sold = by_product.get(product_id, [])
        out.append(ProductStats(
            product_id, product.name if product else None, product.list_price_cents if product else None,
            product.currency if product else catalog.store.currency, tally["chats"], tally["closed"],
            tally["agreed"], len(sold), sum(d.price_cents for d in sold), _average_discount(sold),
            sum(d.margin_cents for d in sold if d.margin_cents is not None) if product else None))
    return out


def orders_page(conn: Connection, window: Window = EVERYTHING) -> Page[Order]:
    """The orders people placed (a deal bought at its checkout page, an agent's cart, a UCP or ACP
    checkout session), newest first."""
    return Page(tuple(list_orders(conn, limit=window.limit, offset=window.offset)), count_orders(conn), window)
