"""Checkout pages for people: a deal closed in chat, and an agent's cart handed to its human.

Both look the same and take the same form (:data:`haggler.orders.BUYER_FIELDS`), and both place
their order through :mod:`haggler.orders`. A submitted form answers 303 to the page it came from
(post/redirect/get), which then shows the confirmation: reloading it never posts again, and a
second submission finds the order already placed. Only public product facts reach these pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from html import escape

from haggler.catalog import Catalog
from haggler.money import format_money
from haggler.orders import BUYER_FIELDS, Order, OrderLine
from haggler.protocols.agents_json.cart import CheckoutState
from haggler.web.deal_checkout import DealCheckoutState
from haggler.web.layout import header, page

_FORM_STYLE = """<style>
form.buyer{display:grid;gap:.9rem;max-width:30rem;margin:1.5rem 0}
form.buyer label{font-weight:600;display:block;margin-bottom:.25rem}
form.buyer input,form.buyer textarea{width:100%;box-sizing:border-box;padding:.5rem;font:inherit;border:1px solid #8a96a5;border-radius:.4rem}
form.buyer [aria-invalid=true]{border-color:#a4161a;outline:1px solid #a4161a}
.problem{color:#a4161a;margin:.25rem 0 0}.notice{background:#f3f5f8;border-left:4px solid #3d5a80;padding:.6rem 1rem}
button.place{font:inherit;font-weight:600;padding:.7rem 1.2rem;border:0;border-radius:.5rem;background:#1d4e89;color:#fff;cursor:pointer}
button.place:focus-visible,form.buyer input:focus-visible,form.buyer textarea:focus-visible{outline:3px solid #f0a202;outline-offset:2px}
</style>"""

_LABELS = {"name": "Full name", "email": "Email", "address": "Shipping address"}
_AUTOCOMPLETE = {"name": "name", "email": "email", "address": "street-address"}


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def lines_table(lines: tuple[OrderLine, ...], total: int, currency: str) -> str:
    """The priced lines and their total, as the buyer confirms them."""
    head = ("<tr><th scope=col>Product</th><th scope=col>Qty</th><th scope=col>Price</th>"
            "<th scope=col>List price</th><th scope=col>Extras</th><th scope=col>Line total</th></tr>")
    rows = []
    for line in lines:
        price = escape(format_money(line.unit_price_cents, line.currency))
        if line.negotiated:
            price += f" <span class=tag>negotiated (deal {escape(line.deal_id or '')})</span>"
        listed = "" if line.list_price_cents is None else format_money(line.list_price_cents, line.currency)
        extras = ", ".join(line.extras) if line.extras else "—"
        rows.append(f"<tr><td>{escape(line.name)}</td><td>{line.quantity}</td><td>{price}</td>"
                    f"<td>{escape(listed)}</td><td>{escape(extras)}</td>"
                    f"<td>{escape(format_money(line.line_total_cents, line.currency))}</td></tr>")
    rows.append(f"<tr><th scope=row colspan=5>Total</th><td id=total>{escape(format_money(total, currency))}</td></tr>")
    return f"<table id=cart><caption class=tag>Your order</caption>{head}{''.join(rows)}</table>"


def buyer_form(action: str, total: int, currency: str, values: Mapping[str, str] | None = None,
               problems: Mapping[str, str] | None = None) -> str:
    """The checkout form: every field labelled, each problem tied to its field for screen readers."""
    values, problems = values or {}, problems or {}
    fields = []
    for name, longest in BUYER_FIELDS.items():
        value = escape(values.get(name, ""))
        problem = problems.get(name)
        described = f" aria-invalid=true aria-describedby=problem-{name}" if problem else ""
        common = (f"id=buyer-{name} name={name} required maxlength={longest} "
                  f"autocomplete={_AUTOCOMPLETE[name]}{described}")
        control = (f"<textarea {common} rows=3>{value}</textarea>" if name == "address" else
                   f"<input {common} type={'email' if name == 'email' else 'text'} value=\"{value}\">")
        note = f"<p class=problem id=problem-{name}>{escape(_LABELS[name])}: {escape(problem)}</p>" if problem else ""
        fields.append(f"<div><label for=buyer-{name}>{_LABELS[name]}</label>{control}{note}</div>")
    summary = (f"<div role=alert class=notice><p>Please correct {len(problems)} "
               f"field{'s' if len(problems) != 1 else ''} below.</p></div>") if problems else ""
    return (f"{summary}<form class=buyer method=post action=\"{escape(action)}\">{''.join(fields)}"
            f"<div><button class=place type=submit>Place order · {escape(format_money(total, currency))}</button></div></form>")


def confirmation(order: Order) -> str:
    """What the buyer sees once the order is placed (the same on every later visit to the page)."""
    who = ""
    if order.buyer is not None:
        who = (f"<p>Thank you, {escape(order.buyer.name)}. We will send the confirmation to "
               f"{escape(order.buyer.masked_email)}.</p>")
    return (f"<h2>Order placed</h2>{who}<p>Your order number is <strong id=order-id>{escape(order.id)}</strong>, "
            f"placed {escape(_when(order.placed_at))}.</p>")


def _checkout_document(catalog: Catalog, *, intro: str, lines: tuple[OrderLine, ...], total: int, currency: str,
                       order: Order | None, action: str, values: Mapping[str, str] | None,
                       problems: Mapping[str, str] | None) -> str:
    """A checkout page: the confirmation once ``order`` exists, else ``intro`` and the form."""
    body = [header(catalog), "<main>"]
    if order is not None:
        body += [confirmation(order), lines_table(order.lines, order.total_cents, order.currency)]
    else:
        body += [intro, lines_table(lines, total, currency), buyer_form(action, total, currency, values, problems)]
    body.append(f"<p class=tag>{escape(catalog.store.policy)}</p></main>")
    return page(f"{'Order placed' if order else 'Checkout'} — {catalog.store.name}", "".join(body), head=_FORM_STYLE)


def deal_page(catalog: Catalog, state: DealCheckoutState, values: Mapping[str, str] | None = None,
              problems: Mapping[str, str] | None = None) -> str:
    """A deal closed in chat: the agreed price and extras, and the form to buy it."""
    intro = (f"<h2>Your negotiated deal</h2><p>You agreed this price with {escape(catalog.store.rep_name)}. "
             f"It holds until {escape(_when(state.expires_at))}: fill in your details to buy it.</p>")
    return _checkout_document(catalog, intro=intro, lines=(state.line,), total=state.line.line_total_cents,
                              currency=state.deal.currency, order=state.order, action=f"/checkout/{state.deal.id}",
                              values=values, problems=problems)


def cart_page(catalog: Catalog, state: CheckoutState, values: Mapping[str, str] | None = None,
              problems: Mapping[str, str] | None = None) -> str:
    """An agent's cart handed to its human: the snapshot, and the form to place the order."""
    intro = ("<h2>Review your cart</h2><p>Your shopping agent put these items together. "
             "Check them, fill in your details, then place the order.</p>")
    return _checkout_document(catalog, intro=intro, lines=state.lines, total=state.total_cents,
                              currency=state.currency, order=state.order, action=f"/checkout/cart/{state.id}",
                              values=values, problems=problems)


def notice_page(catalog: Catalog, heading: str, text: str, *, link: tuple[str, str] | None = None) -> str:
    """A page that only tells the buyer something: an expired deal, an unknown link."""
    more = f"<p><a href=\"{escape(link[0])}\">{escape(link[1])}</a></p>" if link else ""
    return page(f"{heading} — {catalog.store.name}",
                f"{header(catalog)}<main><h2>{escape(heading)}</h2><p>{escape(text)}</p>{more}</main>")


def deal_in_cart_page(catalog: Catalog) -> str:
    """A deal an agent's cart holds: it is bought at that cart's checkout, not here."""
    return notice_page(catalog, "This deal is in a shopping agent's cart",
                       "A shopping agent has put this deal in its cart: complete the purchase at that cart's checkout.")


def deal_bought_elsewhere_page(catalog: Catalog, door: str) -> str:
    """A deal a shopping agent's checkout (UCP, ACP) bought: each deal is bought once, and this page
    shows nothing of that order or its buyer to whoever holds the link."""
    return notice_page(catalog, "This deal has been bought",
                       f"A shopping agent has already bought this deal through the store's {door.upper()} "
                       "checkout. Each deal can be bought once.")


def expired_deal_page(catalog: Catalog, state: DealCheckoutState) -> str:
    """A deal past its lifetime, with the way to haggle again."""
    return notice_page(catalog, "This deal has expired",
                       f"The price agreed in this chat held until {_when(state.expires_at)}.",
                       link=(f"/store/p/{state.deal.product_id}", "Start a new chat about this product"))


def unknown_link_page(catalog: Catalog) -> str:
    """A checkout link that names nothing of this store (mistyped, or from another store)."""
    return notice_page(catalog, "No such checkout", "This checkout link does not name a deal or a cart of this "
                       "store. Check the link you were given.", link=("/", "Go to the store"))
