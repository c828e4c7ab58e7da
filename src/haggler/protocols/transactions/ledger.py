"""Wallets and their ledger: the only code that moves money on the exchange.

Money is integer cents. Each movement changes wallet balances with one guarded UPDATE (the
guard, e.g. ``available_cents >= :amount``, makes an overdraft impossible even when two workers
race) and writes one ledger entry per wallet it touched, with the balances it left behind. So
money is never created or lost: the sum of every wallet's ``available + held`` always equals the
sum of deposits, and a wallet's entries add up to its balance.

Movements:

* ``deposit``   — new money into a wallet's available balance (the only way money enters);
* ``fund_hold`` — available → held, for a matched transaction;
* ``release``   — held → available, when a matched transaction is cancelled;
* ``capture``   — the payer's held money → the payee's available balance, on completion
  (two entries, one per wallet).

Every function takes the caller's open write transaction, so a movement commits or rolls back
together with the state change that caused it (a transaction becoming matched, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, text

from haggler.errors import InsufficientFunds, InvalidInput, NotFound
from haggler.storage.schema import ledger_entries, wallets

DEPOSIT = "deposit"
FUND_HOLD = "fund_hold"
RELEASE = "release"
CAPTURE = "capture"

#: The largest single movement accepted: far beyond any real payment, small enough that sums of
#: many never leave a signed 64-bit integer.
MAX_AMOUNT_CENTS = 10**12
#: The most a wallet may hold in all: deposits beyond it are refused, so no balance can overflow.
MAX_BALANCE_CENTS = 10**15


@dataclass(frozen=True, slots=True)
class Balance:
    available_cents: int
    held_cents: int

    def to_json(self) -> dict[str, int]:
        return {"availableCents": self.available_cents, "heldCents": self.held_cents}


# One guarded statement per movement. The WHERE clause refuses an overdraft atomically; RETURNING
# gives the balances this statement produced (SQLite >= 3.35 and PostgreSQL both support it).
_MOVE = {
    DEPOSIT: "available_cents = available_cents + :amount",
    FUND_HOLD: "available_cents = available_cents - :amount, held_cents = held_cents + :amount",
    RELEASE: "available_cents = available_cents + :amount, held_cents = held_cents - :amount",
}
_GUARD = {DEPOSIT: f" AND available_cents + held_cents + :amount <= {MAX_BALANCE_CENTS}", FUND_HOLD: " AND available_cents >= :amount", RELEASE: " AND held_cents >= :amount"}
_DELTAS = {DEPOSIT: (1, 0), FUND_HOLD: (-1, 1), RELEASE: (1, -1)}
_STATEMENTS = {
    kind: text(f"UPDATE wallets SET {change} WHERE agent_id = :agent_id{_GUARD[kind]} "
               "RETURNING available_cents, held_cents")
    for kind, change in _MOVE.items()
}
_CAPTURE_DEBIT = text("UPDATE wallets SET held_cents = held_cents - :amount "
                      "WHERE agent_id = :agent_id AND held_cents >= :amount RETURNING available_cents, held_cents")


def open_wallet(conn: Connection, agent_id: str) -> Balance:
    """Create an agent's empty wallet."""
    conn.execute(insert(wallets).values(agent_id=agent_id, available_cents=0, held_cents=0))
    return Balance(0, 0)


def balance(conn: Connection, agent_id: str) -> Balance:
    row = conn.execute(select(wallets.c.available_cents, wallets.c.held_cents)
                       .where(wallets.c.agent_id == agent_id)).first()
    if row is None:
        raise NotFound(f"no wallet for agent {agent_id}")
    return Balance(row.available_cents, row.held_cents)


def deposit(conn: Connection, agent_id: str, amount_cents: int, at: datetime) -> Balance:
    return _move(conn, DEPOSIT, agent_id, amount_cents, at, None)


def hold(conn: Connection, agent_id: str, amount_cents: int, at: datetime, transaction_id: str) -> Balance:
    """Move ``amount_cents`` from available to held; InsufficientFunds (nothing changed) if it is not there."""
    return _move(conn, FUND_HOLD, agent_id, amount_cents, at, transaction_id)


def release(conn: Connection, agent_id: str, amount_cents: int, at: datetime, transaction_id: str) -> Balance:
    return _move(conn, RELEASE, agent_id, amount_cents, at, transaction_id)


def capture(conn: Connection, payer_id: str, payee_id: str, amount_cents: int, at: datetime,
            transaction_id: str) -> tuple[Balance, Balance]:
    """Pay ``amount_cents`` of the payer's held money into the payee's available balance."""
    _check_amount(amount_cents)
    # Lock both wallets in one order first: two captures in opposite directions (an agent can be
    # consumer and provider) would otherwise deadlock on PostgreSQL.
    conn.execute(select(wallets.c.agent_id).where(wallets.c.agent_id.in_((payer_id, payee_id)))
                 .order_by(wallets.c.agent_id).with_for_update()).all()
    payer = _update(conn, _CAPTURE_DEBIT, payer_id, amount_cents, "held")
    _entry(conn, payer_id, CAPTURE, 0, -amount_cents, payer, at, transaction_id)
    payee = _update(conn, _STATEMENTS[DEPOSIT], payee_id, amount_cents, "total")
    _entry(conn, payee_id, CAPTURE, amount_cents, 0, payee, at, transaction_id)
    return payer, payee


def entries(conn: Connection, agent_id: str, *, limit: int, before_id: int | None = None) -> list[dict[str, Any]]:
    """An agent's ledger, newest first; ``before_id`` pages back."""
    query = select(ledger_entries).where(ledger_entries.c.agent_id == agent_id)
    if before_id is not None:
        query = query.where(ledger_entries.c.id < before_id)
    rows = conn.execute(query.order_by(ledger_entries.c.id.desc()).limit(limit))
    return [{
        "id": row.id,
        "kind": row.kind,
        "availableDeltaCents": row.available_delta_cents,
        "heldDeltaCents": row.held_delta_cents,
        "availableAfterCents": row.available_after_cents,
        "heldAfterCents": row.held_after_cents,
        "transactionId": row.transaction_id,
        "createdAt": row.created_at.isoformat(),
    } for row in rows]


def _check_amount(amount_cents: int) -> None:
    if isinstance(amount_cents, bool) or not isinstance(amount_cents, int):
        raise InvalidInput("amounts are whole cents (an integer)")
    if not 0 < amount_cents <= MAX_AMOUNT_CENTS:
        raise InvalidInput(f"amount must be between 1 and {MAX_AMOUNT_CENTS} cents, not {amount_cents}")


def _move(conn: Connection, kind: str, agent_id: str, amount_cents: int, at: datetime,
          transaction_id: str | None) -> Balance:
    _check_amount(amount_cents)
    short = {FUND_HOLD: "available", RELEASE: "held", DEPOSIT: "total"}[kind]
    after = _update(conn, _STATEMENTS[kind], agent_id, amount_cents, short)
    sign_available, sign_held = _DELTAS[kind]
    _entry(conn, agent_id, kind, sign_available * amount_cents, sign_held * amount_cents, after, at, transaction_id)
    return after


def _update(conn: Connection, statement: Any, agent_id: str, amount_cents: int, guarded: str) -> Balance:
    row = conn.execute(statement, {"agent_id": agent_id, "amount": amount_cents}).first()
    if row is not None:
        return Balance(row.available_cents, row.held_cents)
    current = balance(conn, agent_id)  # NotFound when there is no wallet at all
    if guarded == "total":
        raise InvalidInput(f"a wallet holds at most {MAX_BALANCE_CENTS} cents; this deposit would exceed it")
    if guarded == "held":  # a hold the exchange tracks is always there: this is a bug, not bad input
        raise RuntimeError(f"wallet {agent_id} holds {current.held_cents} cents, not {amount_cents}")
    raise InsufficientFunds(f"insufficient funds: {amount_cents} cents needed, "
                            f"{current.available_cents} cents available")


def _entry(conn: Connection, agent_id: str, kind: str, available_delta: int, held_delta: int, after: Balance,
           at: datetime, transaction_id: str | None) -> None:
    conn.execute(insert(ledger_entries).values(
        agent_id=agent_id, kind=kind, available_delta_cents=available_delta, held_delta_cents=held_delta,
        available_after_cents=after.available_cents, held_after_cents=after.held_cents,
        transaction_id=transaction_id, created_at=at))
