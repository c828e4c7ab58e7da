"""``haggler ucp seed`` and ``haggler serve --simulation-secret``, as an operator runs them, and the
official UCP conformance suite against the store they make."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import CheckoutSessions, FulfillmentRequest, LineRequest, PaymentRequest, SessionInput
from haggler.errors import Unavailable
from haggler.orders import order_for
from haggler.payments.handler import PaymentUnavailable
from haggler.server.config import utc_now
from haggler.storage.database import open_database

try:
    from tests.support.servers import ProcessServer, free_port
    from tests.support.ucp import TEA_SHOP, headers, seed
except ImportError:  # pragma: no cover
    from support.servers import ProcessServer, free_port  # type: ignore[no-redef]
    from support.ucp import TEA_SHOP, headers, seed  # type: ignore[no-redef]

#: Where the official suite is (``run``, ``suite/``, ``sdk/``): by default the workspace's shared
#: folder beside the repository (``../shared/ucp-conformance``), which CI lays beside its clone too;
#: a clone on its own has none and skips the suite's test.
CONFORMANCE = Path(os.environ.get("HAGGLER_UCP_CONFORMANCE")
                   or Path(__file__).resolve().parents[3].parent / "shared" / "ucp-conformance")
#: The suite's own mock servers listen on these; the store must not.
SUITE_PORTS = (8284, 8285)


def haggler(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def store_port() -> int:
    port = free_port()
    while port in SUITE_PORTS:
        port = free_port()
    return port


def test_seed_loads_a_data_set_and_loading_again_replaces_it(tmp_path):
    url = f"sqlite:///{tmp_path}/shop.db"
    done = haggler("ucp", "seed", str(TEA_SHOP), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 products, 4 inventory, 3 discounts, 2 promotions, 3 shipping rates, 2 customers, 2 addresses, " \
           "2 payment instruments" in done.stderr
    assert haggler("ucp", "seed", str(TEA_SHOP), "--db", url, cwd=tmp_path).returncode == 0
    db = open_database(url)
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM commerce_products").scalar_one() == 4
    finally:
        db.dispose()


def test_seed_refuses_a_bad_data_set_and_keeps_the_loaded_one(tmp_path):
    url = f"sqlite:///{tmp_path}/shop.db"
    assert haggler("ucp", "seed", str(TEA_SHOP), "--db", url, cwd=tmp_path).returncode == 0
    bad = tmp_path / "bad"
    shutil.copytree(TEA_SHOP, bad)
    (bad / "discounts.csv").write_text("code,type,value,description\nX,bogus,1,x\n")
    done = haggler("ucp", "seed", str(bad), "--db", url, cwd=tmp_path)
    assert done.returncode == 2 and "type must be percentage or fixed_amount" in done.stderr
    (bad / "discounts.csv").write_text("code,type,value,description\nX,percentage,ten,x\n")
    assert "value must be a whole number" in haggler("ucp", "seed", str(bad), "--db", url, cwd=tmp_path).stderr
    assert haggler("ucp", "seed", str(tmp_path / "nowhere"), "--db", url, cwd=tmp_path).returncode == 2
    db = open_database(url)
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM commerce_discounts").scalar_one() == 3
    finally:
        db.dispose()


@pytest.mark.slow
def test_a_seeded_store_served_from_the_command_line_sells_through_ucp(tmp_path):
    url = f"sqlite:///{tmp_path}/shop.db"
    assert haggler("ucp", "seed", str(TEA_SHOP), "--db", url, cwd=tmp_path).returncode == 0
    with ProcessServer("--db", url, "--simulation-secret", "cli-secret-123", cwd=tmp_path, port=store_port()) as server:
        profile = httpx.get(f"{server.base}/.well-known/ucp").json()
        assert "mock_payment_handler" in [h["id"] for h in profile["payment"]["handlers"]]
        answer = httpx.post(f"{server.base}/checkout-sessions", headers=headers(), json={
            "currency": "USD", "line_items": [{"item": {"id": "teapot"}, "quantity": 1}]})
        assert answer.status_code == 201 and answer.json()["totals"][-1]["amount"] == 4500
        assert httpx.post(f"{server.base}/testing/simulate-shipping/x").status_code == 403


def test_a_short_simulation_secret_stops_start_up(tmp_path):
    done = haggler("serve", "--port", str(store_port()), "--simulation-secret", "short", cwd=tmp_path)
    assert done.returncode == 2 and "at least 8 characters" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not (CONFORMANCE / "run").exists(),
                    reason=f"the UCP conformance suite is not at {CONFORMANCE} (set HAGGLER_UCP_CONFORMANCE; "
                           "a clone of this repository alone does not have it)")
def test_the_official_ucp_conformance_suite_passes_offline(tmp_path):
    """The whole official suite (protocol version 2026-01-11) against ``haggler serve`` seeded with
    its flower shop, leaving out only the test that fetches internet URLs (``--offline``)."""
    url = f"sqlite:///{tmp_path}/flowers.db"
    seeded = haggler("ucp", "seed", str(CONFORMANCE / "suite" / "test_data" / "flower_shop"), "--db", url, cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    secret = "conformance-secret-1"
    python = os.environ.get("HAGGLER_UCP_CONFORMANCE_PYTHON") or shutil.which("python3.11") or "python3"
    with ProcessServer("--db", url, "--simulation-secret", secret, cwd=tmp_path, port=store_port()) as server:
        run = subprocess.run([str(CONFORMANCE / "run"), "--server-url", server.base, "--simulation-secret", secret,
                              "--offline", "--python", python], capture_output=True, text=True, timeout=900,
                             cwd=tmp_path)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert re.match(r"ucp-conformance: (\d+)/\1 tests pass", last), run.stdout + run.stderr
    assert last.startswith("ucp-conformance: 58/58 tests pass"), run.stdout


def test_haggler_checkout_lists_held_payments_and_settles_them_by_hand(tmp_path):
    """`haggler checkout holds` shows a payment the processor never answered; `settle --paid`
    places its order, `--unpaid` gives everything back; a session holding nothing is refused."""
    class Silent:
        id = "test"

        def charge(self, charge):  # type: ignore[no-untyped-def]
            raise PaymentUnavailable("timeout")

    url = f"sqlite:///{tmp_path}/held.db"
    seed(url)
    db = open_database(url)
    sessions = CheckoutSessions(db, utc_now, "ucp", {"test": Silent()})
    where = FulfillmentRequest(None, "shipping", (Address("d1", country="US"),), "d1", "ground")
    held = []
    for _ in range(2):
        session_id = sessions.create(SessionInput(currency="USD", lines=(LineRequest(None, "mug", 1),),
                                                  fulfillment=where)).session.id
        with pytest.raises(Unavailable):
            sessions.complete(session_id, PaymentRequest("test", {"token": "t"}), door="ucp")
        held.append(session_id)
    listed = haggler("checkout", "holds", "--db", url, cwd=tmp_path)
    assert listed.returncode == 0 and all(s in listed.stdout for s in held) and "unknown" in listed.stdout
    assert haggler("checkout", "settle", held[0], "--db", url, cwd=tmp_path).returncode == 2  # paid or not?
    paid = haggler("checkout", "settle", held[0], "--paid", "pi_123", "--db", url, cwd=tmp_path)
    assert paid.returncode == 0 and "placed" in paid.stderr
    assert haggler("checkout", "settle", held[1], "--unpaid", "--db", url, cwd=tmp_path).returncode == 0
    again = haggler("checkout", "settle", held[1], "--unpaid", "--db", url, cwd=tmp_path)
    assert again.returncode != 0 and "no checkout" in again.stderr
    with db.read() as conn:
        order = order_for(conn, session_id=held[0])
    assert order is not None and order.payment_reference == "pi_123" and order.door == "ucp"
    assert sessions.get(held[1]).session.status == "canceled"
    assert "no checkout holds" in haggler("checkout", "holds", "--db", url, cwd=tmp_path).stderr
    db.dispose()
