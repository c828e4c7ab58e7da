"""The exchange (``/v1``) as its operator sees it: transactions and the ledger's totals.

Amounts stay in cents here and in the JSON, as the exchange's own API writes them
(``priceCents``). The ledger's totals are read from both of its records, the wallets and the
entries, so the page shows at a glance that they agree: money deposited equals money in wallets
(available + held), because deposits are the only way money enters (``transactions/ledger.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import aliased

from haggler.protocols.transactions.ledger import CAPTURE, DEPOSIT, FUND_HOLD, RELEASE
from haggler.protocols.transactions.service import CANCELLED, COMPLETED, MATCHED, NEGOTIATING
from haggler.storage.schema import (
    exchange_agents,
    exchange_transactions,
    ledger_entries,
    services,
    wallets,
)
from haggler.web.admin.paging import EVERYTHING, Page, Window

#: A transaction's life, in the order the dashboard counts them.
STATUSES = (NEGOTIATING, MATCHED, COMPLETED, CANCELLED)
KINDS = (DEPOSIT, FUND_HOLD, RELEASE, CAPTURE)


@dataclass(frozen=True, slots=True)
class TransactionRow:
    id: str
    service: str
    consumer: str
    provider: str
    status: str
    max_price_cents: int
    price_cents: int | None
    held_cents: int
    end_reason: str | None
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "service": self.service, "consumer": self.consumer, "provider": self.provider,
                "status": self.status, "max_price_cents": self.max_price_cents, "price_cents": self.price_cents,
                "held_cents": self.held_cents, "end_reason": self.end_reason,
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    wallets: int
    available_cents: int
    held_cents: int
    #: Per entry kind: how many entries, and the sum of their available and held deltas.
    entries: dict[str, tuple[int, int, int]]
    transactions: dict[str, int]

    @property
    def deposited_cents(self) -> int:
        return self.entries[DEPOSIT][1]

    @property
    def captured_cents(self) -> int:
        """Paid to providers: a capture's credit to the payee's available balance (its debit is
        the payer's held balance, so the kind's available delta is the credit alone)."""
        return self.entries[CAPTURE][1]

    def to_json(self) -> dict[str, Any]:
        return {"wallets": self.wallets, "available_cents": self.available_cents, "held_cents": self.held_cents,
                "deposited_cents": self.deposited_cents, "captured_cents": self.captured_cents,
                "entries": {kind: {"count": n, "available_delta_cents": available, "held_delta_cents": held}
                            for kind, (n, available, held) in self.entries.items()},
                "transactions": dict(self.transactions)}


def ledger_totals(conn: Connection) -> LedgerTotals:
    count, available, held = conn.execute(select(func.count(), func.coalesce(func.sum(wallets.c.available_cents), 0),
                                                 func.coalesce(func.sum(wallets.c.held_cents), 0))).one()
    entries = {kind: (0, 0, 0) for kind in KINDS}
    for kind, n, available_delta, held_delta in conn.execute(
            select(ledger_entries.c.kind, func.count(), func.sum(ledger_entries.c.available_delta_cents),
                   func.sum(ledger_entries.c.held_delta_cents)).group_by(ledger_entries.c.kind)):
        entries[kind] = (n, int(available_delta), int(held_delta))
    statuses = dict.fromkeys(STATUSES, 0)
    for status, n in conn.execute(select(exchange_transactions.c.status, func.count())
                                  .group_by(exchange_transactions.c.status)):
        statuses[status] = n
    return LedgerTotals(count, int(available), int(held), entries, statuses)


_CONSUMER = aliased(exchange_agents, name="consumer")
_PROVIDER = aliased(exchange_agents, name="provider")


def transactions_page(conn: Connection, window: Window = EVERYTHING) -> Page[TransactionRow]:
    """Transactions, the most recently changed first, with their service's and parties' names."""
    tx = exchange_transactions.c
    query = (select(tx.id, services.c.name.label("service"), _CONSUMER.c.name.label("consumer"),
                    _PROVIDER.c.name.label("provider"), tx.status, tx.max_price_cents, tx.price_cents, tx.held_cents,
                    tx.end_reason, tx.created_at, tx.updated_at)
             .join(services, services.c.id == tx.service_id)
             .join(_CONSUMER, _CONSUMER.c.id == tx.consumer_id)
             .join(_PROVIDER, _PROVIDER.c.id == tx.provider_id)
             .order_by(tx.updated_at.desc(), tx.id).offset(window.offset or None).limit(window.limit))
    rows = [TransactionRow(*row) for row in conn.execute(query)]
    total = conn.execute(select(func.count()).select_from(exchange_transactions)).scalar_one()
    return Page(rows, total, window)
