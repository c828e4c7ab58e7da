"""``haggler market verify`` (spec 003: 8. Deal Confirmation) as a user runs it on a file: exit 0
when both parties signed these exact terms, 1 when a check fails, 2 when the file cannot be checked."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from haggler.cli import app as cli
from haggler.trust.messages import encode_hex_public_key
from support.market_messages import Keys, examples

KEYS = Keys()
DEAL = examples(KEYS)["deal_confirmed"][0]
BUYER_KEY, SELLER_KEY = encode_hex_public_key(KEYS.buyer), encode_hex_public_key(KEYS.seller)


def deal_file(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "deal.json"
    path.write_text(json.dumps(document), "utf-8")
    return str(path)


def served(deal: dict[str, Any]) -> dict[str, Any]:
    return {"dealId": "dl_7", "status": "confirmed", "deal": deal,
            "publicKeys": {"buyer": BUYER_KEY, "seller": SELLER_KEY}}


def verify(*args: str) -> Any:
    return CliRunner().invoke(cli, ["market", "verify", *args])


def test_spec_003_deal_confirmation_verify_exits_0_when_both_parties_signed(tmp_path: Path) -> None:
    result = verify(deal_file(tmp_path, served(DEAL)))
    assert result.exit_code == 0, result.output
    assert "valid: both parties signed these exact terms" in result.output
    assert "dl_7" in result.output and "buyer.signature" in result.output and "INVALID" not in result.output


def test_spec_003_deal_confirmation_verify_a_bare_deal_with_keys(tmp_path: Path) -> None:
    path = deal_file(tmp_path, DEAL)
    assert verify(path, "--buyer-key", BUYER_KEY, "--seller-key", SELLER_KEY).exit_code == 0
    missing = verify(path, "--buyer-key", BUYER_KEY)
    assert missing.exit_code == 2 and "--seller-key" in missing.output and "Traceback" not in missing.output


def test_spec_003_deal_confirmation_verify_exits_1_naming_the_failed_check(tmp_path: Path) -> None:
    tampered = copy.deepcopy(DEAL) | {"finalPrice": 150}
    result = verify(deal_file(tmp_path, served(tampered)))
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "INVALID: buyer.signature, seller.signature failed (the reasons are in the table)")
    assert "does not verify with publicKeys.buyer" in result.output


def test_spec_003_deal_confirmation_verify_json_is_for_scripts(tmp_path: Path) -> None:
    path = deal_file(tmp_path, served(DEAL))
    good = verify(path, "--json")
    assert good.exit_code == 0 and json.loads(good.output)["valid"] is True
    bad = verify(path, "--json", "--seller-key", BUYER_KEY)
    data = json.loads(bad.output)
    assert bad.exit_code == 1 and data["valid"] is False and data["dealId"] == "dl_7"
    assert [(c["check"], c["valid"]) for c in data["checks"]] == [
        ("shape", True), ("buyer.signature", True), ("seller.signature", False)]


@pytest.mark.parametrize(("content", "complaint"), [
    (None, "cannot read"), (b"{not json", "is not JSON"), (b"[1, 2]", "not an object"),
    (b'{"dealId": "dl_7"}', "neither a served deal document"), (b"\xff", "not UTF-8"),
])
def test_spec_003_deal_confirmation_verify_exits_2_when_the_file_cannot_be_checked(
        tmp_path: Path, content: bytes | None, complaint: str) -> None:
    path = tmp_path / "deal.json"
    if content is not None:
        path.write_bytes(content)
    result = verify(str(path))
    assert result.exit_code == 2
    # one line however long the temporary path: errors are not wrapped when not on a terminal
    [line] = result.output.splitlines()
    assert line.startswith("error: ") and complaint in line and "Traceback" not in result.output
    if complaint in ("cannot read", "is not JSON"):
        assert f"{path} {complaint}" in line or f"{complaint} {path}" in line
