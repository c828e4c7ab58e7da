"""`haggler check` as a store owner runs it: a real process against real servers."""

from __future__ import annotations

import json
import subprocess
import sys

from haggler.protocols.negotiate_v1.settings import StoreLimits

try:
    from tests.support.broken_store import BrokenStore, Defects
    from tests.support.servers import ThreadedServer
except ImportError:  # pragma: no cover
    from support.broken_store import BrokenStore, Defects  # type: ignore[no-redef]
    from support.servers import ThreadedServer  # type: ignore[no-redef]


def haggler_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", "check", *args], capture_output=True, text=True,
                          timeout=120)


def test_check_passes_our_store_and_exits_zero(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=20))
    result = haggler_check(store.base)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "chat.next_absolute" in result.stdout and "FAIL" not in result.stdout
    assert "nash.v1 conformance:" in result.stdout and "chat.checkout_url" in result.stdout


def test_check_flags_a_broken_store_and_exits_non_zero():
    store = BrokenStore(Defects(relative_next=True, floor_leak=True))
    with ThreadedServer(store.app) as server:
        result = haggler_check(server.base, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["protocol"] == "negotiate.v1"
    failed = {r["id"] for r in report["results"] if r["status"] == "fail"}
    assert {"chat.next_absolute", "privacy.hidden_fields"} <= failed
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["privacy.hidden_fields"]["level"] == "MUST" and by_id["privacy.hidden_fields"]["section"] == "§7"
    assert "floor" in by_id["privacy.hidden_fields"]["detail"]
