"""The README, run as a reader runs it: every command in its ``sh`` and ``python`` blocks, in order.

The reader's setup is the Quick start: ``scripts/serve`` keeps the demo store up in one terminal,
and a second terminal runs the rest from the repository root, with ``.venv`` active (the README's
own ``source .venv/bin/activate``). This test is that second terminal: one bash session in a
directory laid out like the checkout (its scripts, examples, pyproject.toml and .venv), so that
the files the commands write (``haggler.db``, ``trail.json``, ``lab-out/``...) stay out of it.

What the test changes in a command, and only that:
- the store listens on a free port instead of 8000 (``127.0.0.1:8000``, ``localhost:8000`` and
  each ``scripts/serve`` or ``haggler serve`` follow it), on loopback even where a command says
  ``--host 0.0.0.0`` (a test opens no port to the network), and ``shop.example.com``, the
  README's stand-in for "your store", is that store;
- a command shown with its output (``$ command`` then what it printed) is followed by its real
  output: ids the sample shows (a chat's ``session_id``) become the real ones in later commands,
  and every field the sample shows must be in the real answer;
- a command that starts a store in the foreground (the Quick start's ``scripts/serve``) is run
  in the background until the store answers; a command that starts one stops the one before
  (the README says to), and the test waits until the new one answers (asked for the first
  ``--allowed-host`` the command names, if any).

``scripts/test`` is not run here: it is the command that runs this test (``.ci/run`` runs it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ci_requires
from tests.support.servers import free_port
from tests.support.shell import ShellSession

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Seconds one command may take: the matching demo waits out a 20 s timeout; a loaded CI
#: machine may take several times that, and a command that hangs fails the test here.
COMMAND_TIMEOUT = 600.0
#: Seconds a store may take to answer after it was started.
START_TIMEOUT = 180.0
#: Set by .ci/run: a missing curl or jq fails the test instead of skipping it.
REQUIRE_SHELL_TOOLS_ENV = "HAGGLER_REQUIRE_SHELL_TOOLS"
_BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)
_STARTS_A_STORE = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:scripts/serve|haggler serve)\b")


@dataclass
class Command:
    text: str
    language: str  # "sh" or "python"
    sample: str | None = None  # the output the README shows after a "$ " command


def readme_commands(text: str) -> list[Command]:
    """The README's commands in order: each line (with its ``\\`` continuations) of an ``sh``
    block, or only its ``$ `` lines when the block shows output; each ``python`` block whole."""
    commands: list[Command] = []
    for language, block in _BLOCK.findall(text):
        if language == "python":
            commands.append(Command(block, "python"))
            continue
        lines = block.splitlines()
        prompted = any(line.startswith("$ ") for line in lines)
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.strip() or (prompted and not line.startswith("$ ")):
                continue
            parts = [line.removeprefix("$ ")]
            while parts[-1].endswith("\\") and i < len(lines):
                parts.append(lines[i])
                i += 1
            sample: list[str] = []
            while prompted and i < len(lines) and not lines[i].startswith("$ "):
                sample.append(lines[i])
                i += 1
            commands.append(Command("\n".join(parts), "sh", "\n".join(sample).strip() or None))
    return commands


def sample_fields(sample: str) -> list[str]:
    """The JSON field names a sample output shows (it may be cut short with ``...``)."""
    return re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:', sample)


def sample_ids(sample: str, actual: str) -> dict[str, str]:
    """Each top-level text value the sample shows, mapped to the real answer's value of that field."""
    try:
        answer = json.loads(actual)
    except ValueError:
        return {}
    shown = dict(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*"([^"]+)"', sample))
    return {value: answer[name] for name, value in shown.items()
            if isinstance(answer, dict) and isinstance(answer.get(name), str) and answer[name] != value}


def without_comment(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` after a blank, outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def answers(url: str, host: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


class Reader:
    """The second terminal: runs each command, keeps one store up, says what went wrong."""

    def __init__(self, work: Path, port: int) -> None:
        self.port = port
        self.replacements = {"127.0.0.1:8000": f"127.0.0.1:{port}", "localhost:8000": f"localhost:{port}",
                             "https://shop.example.com": f"http://127.0.0.1:{port}",
                             "shop.example.com": f"127.0.0.1:{port}"}
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("HAGGLER_", "VIRTUAL_ENV", "PYTHON"))}
        self.shell = ShellSession(work, env)
        self.work = work
        self.store_pid: int | None = None
        self.ran: list[str] = []

    def adapt(self, text: str) -> str:
        for old, new in self.replacements.items():
            text = text.replace(old, new)
        text = re.sub(r"--host (0\.0\.0\.0|::)(?=\s|$)", "--host 127.0.0.1", text)  # tests listen on loopback only
        return re.sub(r"(scripts/serve|haggler serve)\b", rf"\1 --port {self.port}", text)

    def sh(self, command: Command) -> str:
        text = self.adapt(command.text)
        if _STARTS_A_STORE.match(command.text):
            self.stop_store()
            text = without_comment(text)
            if not text.endswith("&"):  # the reader's first terminal: the store in the foreground
                text += " > quickstart-store.log 2>&1 &"
            self.run(text)
            self.store_pid = int(self.run("echo $!"))
            allowed = re.findall(r"--allowed-host\s+(\S+)", text)
            self.wait_for_store(allowed[0] if allowed else None)
        else:
            output = self.run(text)
            if command.sample is not None:
                missing = [field for field in sample_fields(command.sample) if f'"{field}"' not in output]
                assert not missing, f"{command.text}\nanswered without the fields the README shows: {missing}\n{output}"
                self.replacements.update(sample_ids(command.sample, output))
        self.ran.append(command.text)
        return text

    def python(self, command: Command) -> None:
        (self.work / "readme_example.py").write_text(self.adapt(command.text))
        self.run("python readme_example.py")
        self.ran.append(command.text)

    def run(self, text: str) -> str:
        status, output = self.shell.run(text, COMMAND_TIMEOUT)
        assert status == 0, f"`{text}` exited {status}:\n{output}"
        return output.strip()

    def wait_for_store(self, host: str | None) -> None:
        """Until the store answers 200, asked for ``host`` (the first ``--allowed-host``, if any)."""
        deadline = time.monotonic() + START_TIMEOUT
        while not answers(f"http://127.0.0.1:{self.port}/negotiate.json", host):
            assert time.monotonic() < deadline, "the store did not answer:\n" + "\n".join(
                path.read_text() for path in self.work.glob("*.log"))
            time.sleep(0.2)

    def stop_store(self) -> None:
        if self.store_pid is not None:
            self.run(f"kill -INT {self.store_pid}; wait {self.store_pid} || true")
            self.store_pid = None

    def close(self) -> None:
        self.shell.close()


@pytest.fixture
def checkout(tmp_path):
    """A directory laid out like the repository root, sharing its scripts, examples and .venv."""
    missing = [tool for tool in ("curl", "jq") if shutil.which(tool) is None]
    if missing:
        message = f"the README's commands use {' and '.join(missing)} (scripts/install-test-deps installs them)"
        if ci_requires(REQUIRE_SHELL_TOOLS_ENV):
            pytest.fail(f"{message}; {REQUIRE_SHELL_TOOLS_ENV}=1 is set", pytrace=False)
        pytest.skip(message)
    venv = Path(sys.prefix)
    current = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamps = [stamp.read_text().strip() for stamp in venv.glob(".haggler-installed-*")]
    # Else scripts/serve would install into this venv from the copy: run the suite as scripts/test does.
    assert current in stamps, f"{venv} is not a .venv that scripts/ensure-venv made current: run scripts/test"
    for name in ("scripts", "examples", "src", "pyproject.toml", "README.md"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(venv)
    return tmp_path


def test_the_readme_extracts_its_commands_with_their_sample_outputs():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    texts = [command.text for command in commands]
    assert texts[:2] == ["scripts/serve          # installs haggler into .venv and serves the demo store on http://127.0.0.1:8000",
                         "scripts/test           # installs haggler with its test extras into .venv and runs the whole test suite"]
    start = next(command for command in commands if "chat/start" in command.text)
    assert start.text.startswith("curl -s ") and '"session_id"' in start.sample
    assert sum(command.language == "python" for command in commands) == 1
    continued = next(command for command in commands if "/api/cart" in command.text)
    assert continued.text.count("\n") == 1 and continued.sample is None  # one command over two lines
    assert sample_ids('{"session_id":"abc","n":"1"}', '{"session_id":"xyz","n":"1"}') == {"abc": "xyz"}
    assert without_comment("scripts/serve   # serves 'the' store") == "scripts/serve"
    assert without_comment("""curl -d '{"a": "#1"}' x#y # z""") == """curl -d '{"a": "#1"}' x#y"""


@pytest.mark.slow
def test_every_readme_command_runs_as_written(checkout):
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text()  # the one command not run here
    reader = Reader(checkout, free_port())
    try:
        for command in commands:
            if command.text.startswith("scripts/test"):
                continue
            if command.language == "python":
                reader.python(command)
            else:
                reader.sh(command)
        # What the commands left behind says they did their work, not only that they exited 0:
        # the signed trail of the agents.json session holds the cart redeeming the haggled deal.
        deal = reader.run('echo "$DEAL"')
        trail = (checkout / "trail.json").read_text()
        assert deal.startswith("deal_") and deal in trail
        assert json.loads(trail)["session_id"] == reader.run('echo "$S"')
        assert (checkout / "lab-out" / "protocols" / "report.md").exists()
        assert len(list((checkout / "deals").glob("dl_*.json"))) >= 8
    finally:
        reader.close()
    assert len(reader.ran) == len(commands) - 1
