"""ACP's own OpenAPI document (vendored, unmodified: contract/SOURCE.md) drives schemathesis against a
live store: no answer is a 5xx, and every answer is valid against ACP's schemas for its status.

The store is seeded (the tea shop) and holds ready sessions whose ids the path parameter takes (one
for reading and updating, one for completing, one for canceling), so that the fuzzer reaches the
operations rather than only 404s; it carries the store's key and the API version it implements.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from haggler.storage.schema import checkout_sessions

try:
    from tests.support.acp import KEY, OPENAPI, VERSION, ready_session
except ImportError:  # pragma: no cover
    from support.acp import KEY, OPENAPI, VERSION, ready_session  # type: ignore[no-redef]

#: Examples per operation and phase: enough to meet every operation's documented examples and
#: a spread of generated bodies, few enough that the test takes well under a minute.
EXAMPLES = 20
SEED = 20260417
CHECKS = "not_a_server_error,response_schema_conformance"


def _cli() -> str:
    found = Path(sys.executable).with_name("schemathesis")
    return str(found) if found.exists() else shutil.which("schemathesis") or "schemathesis"


def _config(path: Path, ids: dict[str, str]) -> Path:
    """A schemathesis configuration sending each operation's path parameter a seeded session's id,
    and mostly the tea shop's products as line items (so that creates get past "no such product").

    Payment tokens are left to the fuzzer: a successful completion's answer cannot validate against
    ACP's ``CheckoutSessionWithOrder`` as published (its base schema closes ``additionalProperties``
    without listing ``order``); test_acp_checkout.py checks that answer's two parts each by its schema."""
    blocks = ['[dictionaries.products]\nvalues = ["green_tea", "mug", "teapot"]\n\n[parameters]\n'
              '"body.line_items[*].id" = { dictionary = "products", probability = 0.8 }\n']
    for operation, session_id in ids.items():
        blocks.append(f'[[operations]]\ninclude-path = "{operation}"\n'
                      f'parameters = {{ "path.checkout_session_id" = "{session_id}" }}\n')
    path.write_text("\n".join(blocks))
    return path


def _sessions(store) -> int:
    with store.app.state.acp.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(checkout_sessions)).scalar_one())


def test_acps_openapi_document_finds_no_5xx_and_no_answer_outside_its_schemas(acp_store, tmp_path):
    ids = {path: ready_session(acp_store.http)["id"] for path in (
        "/checkout_sessions/{checkout_session_id}", "/checkout_sessions/{checkout_session_id}/complete",
        "/checkout_sessions/{checkout_session_id}/cancel")}
    seeded = _sessions(acp_store)
    base = str(acp_store.http.base_url).rstrip("/")
    command = [_cli(), "--config-file", str(_config(tmp_path / "schemathesis.toml", ids)), "run", str(OPENAPI),
               "--url", base, "--checks", CHECKS, "--max-examples", str(EXAMPLES), "--seed", str(SEED),
               "--generation-deterministic", "--no-color", "-H", f"Authorization: Bearer {KEY}",
               "-H", f"API-Version: {VERSION}"]
    # In tmp_path: schemathesis keeps a crash cache in its working directory.
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert "passed" in result.stdout
    # The fuzzer got past the key and the version: it created sessions of its own.
    assert _sessions(acp_store) > seeded, result.stdout[-6000:]
