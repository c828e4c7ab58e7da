"""``haggler serve`` configured for Stripe as an operator configures it: the key in the environment
only, and every way it can be wrong stopping start-up with one line and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from haggler.cli import app
from haggler.payments.stripe_handler import API_BASE_ENV, KEY_ENV

try:
    from tests.support.fake_stripe import ACCOUNT_ID, API_KEY, FakeStripe
    from tests.support.servers import free_port
except ImportError:  # pragma: no cover
    from support.fake_stripe import ACCOUNT_ID, API_KEY, FakeStripe  # type: ignore[no-redef]
    from support.servers import free_port  # type: ignore[no-redef]


def refused(status: int, stderr: str, needle: str) -> str:
    """Exit status 2 and one line, without a traceback, saying ``needle``."""
    said = stderr.strip()
    assert status == 2, stderr
    assert said.startswith("error: ") and len(said.splitlines()) == 1 and needle in said, said
    return said


def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str, env: dict[str, str]) -> Result:
    """``haggler serve ARGS`` in this process with ``env`` set (uvicorn replaced: nothing listens)."""
    import uvicorn

    for name in [k for k in os.environ if k.startswith("HAGGLER_STRIPE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(uvicorn, "run", lambda application, **options: None)
    return CliRunner().invoke(app, ["serve", "--db", f"sqlite:///{tmp_path}/s.db", "--data-dir",
                                    str(tmp_path / "data"), *args])


def test_a_key_that_is_no_secret_key_stops_start_up_without_printing_it(tmp_path: Path) -> None:
    key = "pk_live_51PublishableNotSecret"
    done = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", str(free_port())], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, KEY_ENV: key})
    said = refused(done.returncode, done.stderr, f"{KEY_ENV} does not hold a Stripe secret key")
    assert "sk_ (secret) or rk_ (restricted)" in said and key not in said
    assert not (tmp_path / "haggler.db").exists()  # refused before the store opened anything


def test_a_key_without_the_extra_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "stripe", None)  # `import stripe` now raises ImportError
    done = serve(tmp_path, monkeypatch, env={KEY_ENV: API_KEY})
    refused(done.exit_code, done.stderr, "pip install 'haggler[stripe]'")


def test_stripe_options_without_a_key_are_refused_rather_than_ignored(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    done = serve(tmp_path, monkeypatch, "--stripe-return-url", "https://shop.example/back", env={})
    refused(done.exit_code, done.stderr, f"configure the Stripe payment handler, which needs {KEY_ENV}")


def test_a_return_url_that_is_no_absolute_url_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = serve(tmp_path, monkeypatch, env={KEY_ENV: API_KEY, "HAGGLER_STRIPE_RETURN_URL": "/checkout/return"})
    refused(done.exit_code, done.stderr, "--stripe-return-url must be an absolute http(s) URL")


def test_a_key_stripe_refuses_stops_start_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeStripe() as fake:
        done = serve(tmp_path, monkeypatch, env={KEY_ENV: "sk_test_not_the_fakes_key_4242", API_BASE_ENV: fake.base})
    said = refused(done.exit_code, done.stderr, f"Stripe refused the API key (HTTP 401): check {KEY_ENV}")
    assert "not_the_fakes_key" not in said


def test_a_stripe_that_does_not_answer_stops_start_up_unless_the_account_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {KEY_ENV: API_KEY, API_BASE_ENV: f"http://127.0.0.1:{free_port()}"}  # nothing listens there
    done = serve(tmp_path, monkeypatch, env=env)
    refused(done.exit_code, done.stderr, "set --stripe-account (HAGGLER_STRIPE_ACCOUNT) to start without asking")

    given = serve(tmp_path, monkeypatch, "--stripe-account", ACCOUNT_ID, env=env)
    assert given.exit_code == 0, given.output
    assert f"payments through Stripe (handler stripe, account {ACCOUNT_ID}, sandbox; 3-D Secure returns UCP buyers " \
        "to the store's own page, and in ACP, without --stripe-return-url" in given.stderr
