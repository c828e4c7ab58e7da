"""Property test of the exchange ledger: random deposits, holds, releases and captures between a
few agents, on a real SQLite database, checked after every step against a pure-Python model.

Invariants: money is neither created nor lost (the wallets' available + held adds up to the
successful deposits), no balance goes negative, a refused movement changes nothing, and each
wallet's ledger entries add up to its balance with ``*_after`` equal to the running sums.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from haggler.errors import InsufficientFunds, InvalidInput
from haggler.protocols.transactions import accounts, ledger
from haggler.storage.database import Database, open_database
from haggler.storage.schema import ledger_entries, wallets

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
AGENTS = 3
#: Small amounts so that refusals (more than is there) and successes both happen often.
AMOUNTS = st.integers(min_value=1, max_value=500)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory):
    database = open_database(f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db")
    yield database
    database.dispose()


def _machine(db: Database) -> type[RuleBasedStateMachine]:
    class LedgerMachine(RuleBasedStateMachine):
        agents = st.integers(min_value=0, max_value=AGENTS - 1)

        @initialize()
        def fresh_agents(self) -> None:
            # Fresh agents for every example keep examples independent on the shared database.
            with db.write() as conn:
                self.ids = [accounts.register(conn, f"agent-{i}", AT)[0].id for i in range(AGENTS)]
            self.model = {agent: [0, 0] for agent in self.ids}  # agent -> [available, held]
            self.deposited = 0
            self.txn = 0

        def _txn_id(self) -> str:
            self.txn += 1
            return f"txn_{self.txn}"

        def _refused(self, error: type[Exception], move) -> None:
            """Run ``move`` in its own write transaction, which must fail with ``error``."""
            try:
                with db.write() as conn:
                    move(conn)
            except error:
                return
            raise AssertionError(f"expected {error.__name__}")

        @rule(who=agents, amount=AMOUNTS)
        def deposit(self, who: int, amount: int) -> None:
            agent = self.ids[who]
            with db.write() as conn:
                after = ledger.deposit(conn, agent, amount, AT)
            self.model[agent][0] += amount
            self.deposited += amount
            assert [after.available_cents, after.held_cents] == self.model[agent]

        def _shift(self, who: int, amount: int, move, *, to_held: bool, error: type[Exception]) -> None:
            """Move ``amount`` of one wallet between available and held (a hold, or back: a release),
            refused with ``error`` when the side it leaves has less."""
            agent = self.ids[who]
            txn = self._txn_id()
            source, target = (0, 1) if to_held else (1, 0)
            if amount > self.model[agent][source]:
                self._refused(error, lambda conn: move(conn, agent, amount, AT, txn))
                return
            with db.write() as conn:
                after = move(conn, agent, amount, AT, txn)
            self.model[agent][source] -= amount
            self.model[agent][target] += amount
            assert [after.available_cents, after.held_cents] == self.model[agent]

        @rule(who=agents, amount=AMOUNTS)
        def hold(self, who: int, amount: int) -> None:
            self._shift(who, amount, ledger.hold, to_held=True, error=InsufficientFunds)

        @rule(who=agents, amount=AMOUNTS)
        def release(self, who: int, amount: int) -> None:
            # A release of more than is held is a bug in the caller, not bad input.
            self._shift(who, amount, ledger.release, to_held=False, error=RuntimeError)

        @rule(payer=agents, payee=agents, amount=AMOUNTS)
        def capture(self, payer: int, payee: int, amount: int) -> None:
            payer_id, payee_id = self.ids[payer], self.ids[payee]
            txn = self._txn_id()
            if amount > self.model[payer_id][1]:
                self._refused(RuntimeError,
                              lambda conn: ledger.capture(conn, payer_id, payee_id, amount, AT, txn))
                return
            with db.write() as conn:
                ledger.capture(conn, payer_id, payee_id, amount, AT, txn)
            self.model[payer_id][1] -= amount
            self.model[payee_id][0] += amount

        @rule(who=agents, amount=st.integers(min_value=-5, max_value=0) | st.just(ledger.MAX_AMOUNT_CENTS + 1),
              kind=st.sampled_from(["deposit", "hold", "release"]))
        def bad_amount(self, who: int, amount: int, kind: str) -> None:
            agent = self.ids[who]
            move = getattr(ledger, kind)
            args = (agent, amount, AT) if kind == "deposit" else (agent, amount, AT, "txn_bad")
            self._refused(InvalidInput, lambda conn: move(conn, *args))

        @invariant()
        def books_balance(self) -> None:
            if not hasattr(self, "ids"):
                return
            with db.read() as conn:
                rows = {row.agent_id: (row.available_cents, row.held_cents) for row in conn.execute(
                    select(wallets).where(wallets.c.agent_id.in_(self.ids)))}
                found = {agent: conn.execute(select(ledger_entries).where(ledger_entries.c.agent_id == agent)
                                             .order_by(ledger_entries.c.id)).all() for agent in self.ids}
            # The database agrees with the model, and money is neither created nor lost.
            assert {agent: list(value) for agent, value in rows.items()} == self.model
            assert sum(available + held for available, held in rows.values()) == self.deposited
            for agent, (available, held) in rows.items():
                assert available >= 0 and held >= 0
                running_available = running_held = 0
                for entry in found[agent]:
                    running_available += entry.available_delta_cents
                    running_held += entry.held_delta_cents
                    assert (entry.available_after_cents, entry.held_after_cents) == (running_available, running_held)
                assert (running_available, running_held) == (available, held)

    return LedgerMachine


def test_ledger_moves_money_without_creating_or_losing_any(db: Database) -> None:
    run_state_machine_as_test(_machine(db), settings=settings(
        max_examples=60, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]))


def test_database_refuses_a_negative_balance_written_directly(db_url: str) -> None:
    """Defence in depth: even a statement that bypasses the ledger's guards cannot overdraw."""
    db = open_database(db_url)
    try:
        with db.write() as conn:
            agent = accounts.register(conn, "direct", AT)[0].id
            ledger.deposit(conn, agent, 100, AT)
        for column in ("available_cents", "held_cents"):
            with pytest.raises(IntegrityError), db.write() as conn:
                conn.execute(update(wallets).where(wallets.c.agent_id == agent).values(**{column: -1}))
        with db.read() as conn:
            assert ledger.balance(conn, agent) == ledger.Balance(100, 0)
    finally:
        db.dispose()
