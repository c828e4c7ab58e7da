"""The ``haggler`` command as a user runs it: real processes, real files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

try:
    from tests.support.servers import ProcessServer
except ImportError:  # pragma: no cover
    from support.servers import ProcessServer  # type: ignore[no-redef]


def haggler(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.slow
def test_serve_defaults_to_the_demo_store_with_sqlite_in_the_working_directory(tmp_path):
    with ProcessServer(cwd=tmp_path) as server:
        doc = httpx.get(f"{server.base}/negotiate.json").json()
        assert doc["negotiate_protocol"] == "negotiate.v1"
        assert len(doc["products"]) >= 8
        assert len({p.get("kind") for p in doc["products"]}) >= 3
    assert (tmp_path / "haggler.db").exists()


@pytest.mark.parametrize(("product_patch", "needle"), [
    ({"floor": None}, "floor"),
    ({"floor": 9999}, "floor"),
    ({"id": "bad id"}, "id"),
])
def test_serve_refuses_a_bad_catalog_naming_product_and_field(tmp_path, product_patch, needle):
    catalog = {"store": {"name": "S", "rep_name": "R", "tagline": "T", "policy_default": "P"},
               "products": [{"id": "good-one", "name": "Thing", "list_price": 100, "floor": 80, "levers": []}]}
    catalog["products"][0].update({k: v for k, v in product_patch.items() if v is not None})
    if product_patch.get("floor", 0) is None:
        del catalog["products"][0]["floor"]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    result = haggler("serve", "--catalog", str(path), "--port", "1", cwd=tmp_path)
    assert result.returncode == 2
    pid = catalog["products"][0]["id"]
    assert f"'{pid}'" in result.stderr and needle in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_a_duplicate_product_id(tmp_path):
    product = {"id": "twin", "name": "Thing", "list_price": 100, "floor": 80, "levers": []}
    catalog = {"store": {"name": "S", "rep_name": "R", "tagline": "T", "policy_default": "P"},
               "products": [product, product]}
    (tmp_path / "c.json").write_text(json.dumps(catalog))
    result = haggler("serve", "--catalog", "c.json", cwd=tmp_path)
    assert result.returncode == 2 and "'twin'" in result.stderr and "duplicate" in result.stderr


def test_serve_reports_every_catalog_problem_at_once(tmp_path):
    catalog = {"store": {"currency": "JPY"},
               "products": [{"id": "one", "name": "Thing", "list_price": 100, "floor": 80, "levrs": []},
                            {"id": "two", "name": "Thing", "list_price": 100, "floor": 120}]}
    (tmp_path / "c.json").write_text(json.dumps(catalog))
    result = haggler("serve", "--catalog", "c.json", "--port", "1", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "c.json: 7 problems" in result.stderr
    for pointer in ("/store/name", "/store/rep_name", "/store/tagline", "/store/policy_default", "/store/currency",
                    "/products/0/levrs (product 'one'): unknown field: did you mean 'levers'?",
                    "/products/1/floor (product 'two')"):
        assert f"\n  {pointer}" in result.stderr, pointer


@pytest.mark.slow
def test_serve_no_strict_catalog_warns_of_unknown_fields_and_serves_without_them(tmp_path):
    catalog = {"store": {"name": "S", "rep_name": "R", "tagline": "T", "policy_default": "P"},
               "products": [{"id": "one", "name": "Thing", "list_price": 100, "floor": 80,
                             "levrs": ["SECRET-LEVER-TYPO"], "x_supplier": "SECRET-SUPPLIER"}]}
    (tmp_path / "c.json").write_text(json.dumps(catalog))
    with ProcessServer("--catalog", "c.json", "--no-strict-catalog", cwd=tmp_path) as server:
        body = httpx.get(f"{server.base}/negotiate.json").text
        assert "one" in body and "SECRET" not in body
    log = " ".join(server.log().split())
    assert "warning: c.json: /products/0/levrs (product 'one'): unknown field: did you mean 'levers'?" in log
    assert "x_supplier" not in log


def test_serve_refuses_bad_options(tmp_path):
    result = haggler("serve", "--trusted-proxy", "nope", cwd=tmp_path)
    assert result.returncode == 2 and "nope" in result.stderr
    result = haggler("serve", "--public-url", "shop.example", cwd=tmp_path)
    assert result.returncode == 2 and "--public-url" in result.stderr
    result = haggler("serve", "--db", "mysql://x/y", cwd=tmp_path)
    assert result.returncode == 2 and "unsupported database" in result.stderr


def test_serve_refuses_several_workers_on_sqlite_and_says_why(tmp_path):
    result = haggler("serve", "--workers", "2", "--db", f"sqlite:///{tmp_path}/one.db", cwd=tmp_path)
    message = result.stderr
    assert result.returncode == 2, result.stderr
    assert message.count("\n") == 1  # one line, however long: the console does not wrap when piped
    assert "--workers 2 needs PostgreSQL" in message and "SQLite takes one writer at a time" in message
    assert "--db postgresql://" in message
    assert not (tmp_path / "one.db").exists()  # refused before anything was opened
    result = haggler("serve", "--workers", "0", cwd=tmp_path)
    assert result.returncode == 2 and "--workers" in result.stderr


@pytest.mark.slow
def test_deals_lists_recorded_deals_as_table_and_json(tmp_path):
    db = f"sqlite:///{tmp_path}/store.db"
    with ProcessServer("--db", db, cwd=tmp_path) as server:
        sessions = []
        for product_id in ("aerion-v12-cordless", "stillair-p400"):
            body = httpx.get(f"{server.base}/api/store/chat/start", params={"product_id": product_id}).json()
            sessions.append(body["session_id"])
            body = httpx.get(body["next"].replace("{url_encoded_message}", "deal")).json()
            assert body["closed"] is True
    result = haggler("deals", "--db", db, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    deals = json.loads(result.stdout)
    assert {d["product_id"] for d in deals} == {"aerion-v12-cordless", "stillair-p400"}
    assert {d["session_id"] for d in deals} == set(sessions)
    assert all(set(d) >= {"id", "price", "currency", "extras", "created_at"} for d in deals)
    table = haggler("deals", "--db", db, cwd=tmp_path)
    assert table.returncode == 0
    assert "aerion-v12-cordless" in table.stdout and "$649.99" in table.stdout and "2 deals" in table.stdout


def test_deals_on_an_empty_database(tmp_path):
    from haggler.storage.database import open_database

    open_database(f"sqlite:///{tmp_path}/empty.db").dispose()  # what `serve` leaves before any chat
    result = haggler("deals", "--db", f"sqlite:///{tmp_path}/empty.db", "--json", cwd=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout) == []


@pytest.mark.parametrize("command", [("deals",), ("orders",), ("chats",), ("stats",), ("exchange",), ("match", "insights"),
                                     ("match", "opportunities"), ("market", "books"), ("market", "deals")])
def test_commands_that_read_the_store_refuse_a_database_that_is_not_there(tmp_path, command):
    missing = tmp_path / "typo" / "stroe.db"
    result = haggler(*command, "--db", f"sqlite:///{missing}", cwd=tmp_path)
    assert result.returncode == 2 and "no database at" in result.stderr and "Traceback" not in result.stderr
    assert not missing.exists() and not missing.parent.exists()  # nothing was created
    stranger = tmp_path / "other.db"
    import sqlite3

    with sqlite3.connect(stranger) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    result = haggler(*command, "--db", f"sqlite:///{stranger}", cwd=tmp_path)
    assert result.returncode == 2 and "not a haggler database" in result.stderr
    with sqlite3.connect(stranger) as conn:  # and it was left as it was
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["notes"]


def test_orders_lists_what_people_bought_as_table_and_json(tmp_path, make_store):
    from tests.support.checkout import close_a_deal

    db = f"sqlite:///{tmp_path}/orders.db"
    store = make_store(db_url=db)
    bought = []
    for product in store.catalog.products[:2]:
        deal = close_a_deal(store.http, product)
        form = {"name": f"Buyer of {product.id}", "email": "buyer@example.com", "address": "1 Main St"}
        assert store.http.post(deal["checkout_url"], data=form).status_code == 303
        bought.append((product, deal))
    result = haggler("orders", "--db", db, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["total"], found["offset"], found["limit"]) == (2, 0, None)
    listed = found["items"]
    assert {o["deal_id"] for o in listed} == {deal["id"] for _, deal in bought}
    for order in listed:
        product, deal = next((p, d) for p, d in bought if d["id"] == order["deal_id"])
        assert order["source"] == "chat" and order["checkout_id"] is None
        assert order["total_cents"] == round(deal["price"] * 100) and order["currency"] == deal["currency"]
        assert order["lines"][0]["name"] == product.name and order["lines"][0]["extras"] == deal["extras"]
        assert order["buyer"] == {"name": f"Buyer of {product.id}", "email": "buyer@example.com", "address": "1 Main St"}
        assert order["placed_at"].endswith("Z") and order["order_id"].startswith("ord_")
    page = haggler("orders", "--db", db, "--json", "--limit", "1", "--offset", "1", cwd=tmp_path)
    assert [o["order_id"] for o in json.loads(page.stdout)["items"]] == [listed[1]["order_id"]]
    table = haggler("orders", "--db", db, cwd=tmp_path)
    assert table.returncode == 0 and "2 orders" in table.stdout
    assert "chat" in table.stdout and bought[0][0].name in table.stdout and "Buyer of" in table.stdout


@pytest.mark.parametrize(("args", "env", "needle"), [
    (("--claim-timeout", "0"), {}, "--claim-timeout must be a positive number of seconds"),
    (("--parked-timeout", "-5"), {}, "--parked-timeout must be a positive number of seconds"),
    (("--negotiation-timeout", "0"), {}, "--negotiation-timeout must be a positive number of seconds"),
    (("--negotiation-timeout", "soon"), {}, "--negotiation-timeout"),
    (("--operator-token", "short"), {}, "--operator-token must be at least 16 characters"),
    ((), {"HAGGLER_OPERATOR_TOKEN": "short"}, "--operator-token must be at least 16 characters"),
    (("--offer-turn-cap", "1"), {}, "--offer-turn-cap must be a number of offers of at least 2, or 0 (no cap)"),
    (("--offer-turn-cap", "-1"), {}, "must not be negative"),
    (("--clear-interval", "-0.5"), {}, "must not be negative"),
    (("--deal-expiry", "0"), {}, "--deal-expiry must be a whole number of seconds, at least 1, not 0"),
    (("--max-wrong-tokens", "0"), {}, "--max-wrong-tokens must be a whole number of at least 1"),
    (("--max-contacts-per-hour", "0"), {}, "--max-contacts-per-hour must be a whole number of at least 1"),
])
def test_serve_refuses_bad_matching_options(tmp_path, args, env, needle):
    import os

    result = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", "1", *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert result.returncode == 2
    assert needle in " ".join(result.stderr.replace("│", " ").split())
    assert "Traceback" not in result.stderr and "short" not in result.stderr.replace("--operator-token", "")


def test_serve_sweeps_at_least_as_often_as_its_shortest_deadline():
    from haggler.cli import market_settings, matching_settings, sweep_interval

    defaults = matching_settings(None, 6 * 3600, 24 * 3600, 24 * 3600)
    assert sweep_interval(3600, defaults) == 60.0
    assert sweep_interval(3600, matching_settings(None, 6 * 3600, 24 * 3600, 20)) == 5.0
    assert sweep_interval(2, defaults) == 1.0
    assert sweep_interval(3600, defaults, market_settings(20, 0, 8)) == 2.0  # a deal's expiry is a deadline too


@pytest.mark.slow
def test_serve_runs_the_matching_api_with_its_options(tmp_path, monkeypatch):
    token = "a-long-enough-operator-token"
    monkeypatch.setenv("HAGGLER_OPERATOR_TOKEN", token)
    with ProcessServer("--negotiation-timeout", "30", "--parked-timeout", "60", "--claim-timeout", "10",
                       cwd=tmp_path) as server:
        anonymous = httpx.post(f"{server.base}/api/users", json={"name": "Ann"},
                               headers={"Authorization": "Bearer not-the-token"})
        assert anonymous.status_code == 401
        created = httpx.post(f"{server.base}/api/users", json={"name": "Ann"},
                             headers={"Authorization": f"Bearer {token}"})
        assert created.status_code == 201 and created.json()["apiKey"].startswith("hmu_")
    assert "match negotiation at http://" in server.log()


@pytest.mark.slow
def test_serve_clears_market_books_on_its_schedule(tmp_path):
    """spec 003: Protocol 4: Double Auction — ``--clear-interval`` runs the call auction by itself."""
    from tests.support.market import BOOK, Trader

    with ProcessServer("--clear-interval", "0.2", "--offer-turn-cap", "4", cwd=tmp_path) as server, \
            httpx.Client(base_url=server.base) as http:
        from datetime import datetime, timezone

        def clock() -> datetime:
            return datetime.now(timezone.utc)
        seller, buyer = Trader(http, "sched-seller", clock), Trader(http, "sched-buyer", clock)
        for agent, limit in ((seller, {"minAcceptablePrice": 100}), (buyer, {"maxSpend": 300})):
            agent.register()
            agent.file_mandate(**limit)
        assert http.post(f"/market/books/{BOOK}/orders", json=seller.sign(seller.order("sell", 150))).status_code == 201
        assert http.post(f"/market/books/{BOOK}/orders", json=buyer.sign(buyer.order("buy", 170))).status_code == 201
        deadline = time.monotonic() + 60  # generous: a loaded machine is slow, not wrong
        while time.monotonic() < deadline:
            messages = buyer.inbox()["messages"]
            if any(m["body"].get("event") == "deal_closed" for m in messages):
                break
            time.sleep(0.1)
        closed = [m["body"] for m in buyer.inbox()["messages"] if m["body"].get("event") == "deal_closed"]
        assert len(closed) == 1 and closed[0]["finalPrice"] == 160 and closed[0]["protocol"] == "double_auction"
    assert "agent-native market at http://" in server.log()


@pytest.mark.parametrize("args", [
    ("serve", "--port", "99999"),
    ("serve", "--port", "0"),
    ("mcp", "--http", "--port", "65536"),
], ids=["serve-99999", "serve-0", "mcp-65536"])
def test_a_port_outside_1_to_65535_is_refused(tmp_path, args):
    result = haggler(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: --port must be between 1 and 65535, got {args[-1]}"
    assert not (tmp_path / "haggler.db").exists()  # refused before anything was opened


def serve_start_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[str, dict]:
    """What ``haggler serve ARGS`` prints before it listens, and what it asks uvicorn for, the app
    as ``app`` (uvicorn itself replaced: nothing listens, on any interface)."""
    import uvicorn
    from typer.testing import CliRunner

    from haggler.cli import app

    asked: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda application, **options: asked.update(options, app=application))
    result = CliRunner().invoke(app, ["serve", "--db", f"sqlite:///{tmp_path}/s.db", "--data-dir",
                                      str(tmp_path / "data"), *args])
    assert result.exit_code == 0, result.output
    return result.stderr, asked


@pytest.mark.parametrize(("args", "base"), [
    (("--host", "0.0.0.0", "--port", "8123"), "http://127.0.0.1:8123"),
    (("--host", "::", "--port", "8123"), "http://[::1]:8123"),
    (("--host", "0.0.0.0", "--port", "8123", "--allowed-host", "shop.lan"), "http://shop.lan:8123"),
    (("--host", "0.0.0.0", "--public-url", "https://shop.example.com/"), "https://shop.example.com"),
    (("--host", "::1", "--port", "8123"), "http://[::1]:8123"),
], ids=["ipv4-wildcard", "ipv6-wildcard", "allowed-host", "public-url", "ipv6-loopback"])
def test_serve_prints_links_the_store_answers(tmp_path, monkeypatch, args, base):
    printed, asked = serve_start_up(tmp_path, monkeypatch, *args)
    assert asked["host"] == args[1]  # it still listens where it was told
    links = [word for word in printed.split() if "://" in word]
    assert len(links) == 6 and all(link.startswith(base + "/") for link in links), printed
    assert "0.0.0.0" not in links and "[::]" not in printed


def test_serve_on_every_interface_says_how_other_machines_reach_it(tmp_path, monkeypatch):
    printed, _ = serve_start_up(tmp_path, monkeypatch, "--host", "0.0.0.0")
    advice = printed.splitlines()[-1]
    assert advice.startswith("listening on every interface (0.0.0.0): other machines reach the store only by a "
                             "name given with --allowed-host (or --public-url), e.g. --allowed-host 192.168.1.20")
    printed, _ = serve_start_up(tmp_path, monkeypatch, "--host", "0.0.0.0", "--allowed-host", "shop.lan",
                                "--allowed-host", "192.168.1.20")
    assert printed.splitlines()[-1] == ("listening on every interface (0.0.0.0): other machines reach the store "
                                        "only as shop.lan, 192.168.1.20 (--allowed-host, --public-url); any "
                                        "other host name answers 400")
    printed, _ = serve_start_up(tmp_path, monkeypatch)  # loopback: nothing to advise
    assert "every interface" not in printed and "http://127.0.0.1:8000/negotiate.json" in printed


def test_an_error_longer_than_a_screen_stays_one_line_when_piped(tmp_path):
    """Scripts grep errors: piped, the console must not break them at 80 columns."""
    missing = tmp_path / ("a-deal-with-a-long-name-" * 9 + ".json")
    result = haggler("market", "verify", str(missing), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"error: cannot read {missing}: No such file or directory\n"
    assert len(result.stderr) > 200


def test_a_usage_error_is_one_plain_line_when_piped(tmp_path):
    """Typer's usage errors (an unknown option, a bad value) too: click's plain ``Error:`` line,
    not a box 80 columns wide that cuts the option's name in two."""
    option = "--" + "an-option-that-does-not-exist-" * 4
    result = haggler("serve", option, cwd=tmp_path)
    assert result.returncode == 2
    assert f"Error: No such option: {option}\n" in result.stderr and "╭" not in result.stderr
    bad_port = haggler("serve", "--port", "eighty", cwd=tmp_path)
    assert bad_port.returncode == 2 and "Error: Invalid value for '--port': " in bad_port.stderr


@pytest.mark.parametrize(("args", "status"), [((), 403), (("--sandbox-deposits",), 200)],
                         ids=["default-off", "sandbox"])
def test_serve_funds_wallets_out_of_thin_air_only_with_sandbox_deposits(tmp_path, monkeypatch, args, status):
    from starlette.testclient import TestClient

    _, asked = serve_start_up(tmp_path, monkeypatch, *args)
    with TestClient(asked["app"], base_url="http://localhost") as http:
        key = http.post("/v1/agents", json={"name": "agent"}).json()["apiKey"]
        response = http.post("/v1/wallets/me/deposit", json={"amountCents": 100},
                             headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == status, response.text
    if status == 403:
        assert "haggler serve --sandbox-deposits turns on" in response.json()["error"]
