"""``haggler serve`` with the ACP key in the environment (``HAGGLER_ACP_API_KEY``), as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

try:
    from tests.support.acp import KEY, WEBHOOK_SECRET, Receiver, create_body, headers, pay, ready_session
    from tests.support.servers import ProcessServer, free_port
    from tests.support.ucp import SECRET, TEA_SHOP
except ImportError:  # pragma: no cover
    from support.acp import KEY, WEBHOOK_SECRET, Receiver, create_body, headers, pay, ready_session  # type: ignore[no-redef]
    from support.servers import ProcessServer, free_port  # type: ignore[no-redef]
    from support.ucp import SECRET, TEA_SHOP  # type: ignore[no-redef]

#: UCP's conformance suite's mock servers listen on these; the store must not.
AVOIDED = (8284, 8285)


def port() -> int:
    found = free_port()
    while found in AVOIDED:
        found = free_port()
    return found


@pytest.mark.slow
def test_a_store_with_the_key_in_its_environment_serves_acp(tmp_path):
    url = f"sqlite:///{tmp_path}/shop.db"
    seeded = subprocess.run([sys.executable, "-m", "haggler", "ucp", "seed", str(TEA_SHOP), "--db", url], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    key = "cli-acp-key-0123456789"
    with ProcessServer("--db", url, cwd=tmp_path, port=port(), env={"HAGGLER_ACP_API_KEY": key}) as server:
        assert httpx.get(f"{server.base}/.well-known/acp.json").json()["api_base_url"] == server.base
        answer = httpx.post(f"{server.base}/checkout_sessions", headers=headers(api_key=key),
                            json=create_body("teapot"))
        assert answer.status_code == 201 and answer.json()["totals"][-1]["amount"] == 4500
        assert httpx.post(f"{server.base}/checkout_sessions", headers=headers(api_key="another-key-0123456789"),
                          json=create_body("teapot")).status_code == 401


def test_a_short_key_stops_start_up(tmp_path):
    done = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", str(port())], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HAGGLER_ACP_API_KEY": "short"})
    said = " ".join(done.stderr.replace("│", " ").split())
    assert done.returncode == 2 and "HAGGLER_ACP_API_KEY) must be at least 16 characters" in said
    assert "short" not in said and "Traceback" not in said  # the key itself is never printed


@pytest.mark.slow
def test_a_store_with_a_webhook_receiver_in_its_environment_announces_its_acp_orders(tmp_path):
    """rfc.agentic_checkout.md §2.3 as an operator sets it up: the receiver from the platform in
    HAGGLER_ACP_WEBHOOK_URL, the shared secret in HAGGLER_ACP_WEBHOOK_SECRET."""
    url = f"sqlite:///{tmp_path}/shop.db"
    seeded = subprocess.run([sys.executable, "-m", "haggler", "ucp", "seed", str(TEA_SHOP), "--db", url], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    with Receiver() as receiver, ProcessServer(
            "--db", url, cwd=tmp_path, port=port(),
            env={"HAGGLER_ACP_API_KEY": KEY, "HAGGLER_SIMULATION_SECRET": SECRET,
                 "HAGGLER_ACP_WEBHOOK_URL": receiver.url, "HAGGLER_ACP_WEBHOOK_SECRET": WEBHOOK_SECRET}) as server:
        with httpx.Client(base_url=server.base) as http:
            session = ready_session(http)
            done = http.post(f"/checkout_sessions/{session['id']}/complete", headers=headers(), json=pay())
            assert done.status_code == 200, done.text
        [event] = receiver.wait(1)
        assert event["type"] == "order_create" and event["data"]["id"] == done.json()["order"]["id"]


def test_a_webhook_receiver_without_its_secret_stops_start_up(tmp_path):
    env = {**os.environ, "HAGGLER_ACP_API_KEY": "cli-acp-key-0123456789",
           "HAGGLER_ACP_WEBHOOK_URL": "https://platform.example/hooks"}
    env.pop("HAGGLER_ACP_WEBHOOK_SECRET", None)
    done = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", str(port())], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    said = " ".join(done.stderr.replace("│", " ").split())
    assert done.returncode == 2 and "HAGGLER_ACP_WEBHOOK_SECRET, or neither" in said and "Traceback" not in said
