"""``haggler serve`` with the ACP key in the environment (``HAGGLER_ACP_API_KEY``), as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

try:
    from tests.support.acp import create_body, headers
    from tests.support.servers import ProcessServer, free_port
    from tests.support.ucp import TEA_SHOP
except ImportError:  # pragma: no cover
    from support.acp import create_body, headers  # type: ignore[no-redef]
    from support.servers import ProcessServer, free_port  # type: ignore[no-redef]
    from support.ucp import TEA_SHOP  # type: ignore[no-redef]

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
