"""What a user installs: the version in one place, and scripts/ensure-venv installing only when needed.

The wheel itself (built, installed with no extra into a clean virtualenv, served, checked, also at
every dependency's lower bound) is proved by ``scripts/check-install``, which ``.ci/run`` runs
before this suite; its pure parts are tested here.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import haggler

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    """A script under scripts/ (no .py suffix) as a module."""
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader(name.replace("-", "_"), str(ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_haggler_version_prints_the_one_version_the_package_carries():
    result = subprocess.run([sys.executable, "-m", "haggler", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"haggler {haggler.__version__}\n"
    assert importlib.metadata.version("haggler") == haggler.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # read from haggler.__version__


def test_the_changelog_has_an_entry_for_the_current_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {haggler.__version__}" in changelog or "## Unreleased" in changelog


def test_every_direct_dependency_declares_the_lower_bound_check_install_pins():
    check_install = load_script("check-install")
    bounds = check_install.lower_bounds(ROOT / "pyproject.toml")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert len(bounds) == len(declared)
    assert bounds["sqlalchemy"] and bounds["typer"]
    assert check_install.same_release("1.13.0", "1.13") and check_install.same_release("2.0", "2.0.0")
    assert not check_install.same_release("1.13.1", "1.13") and not check_install.same_release(None, "1")


#: Copyleft packages haggler (Apache-2.0) may use only as optional extras, run as separate
#: processes: never imported by the package, nor among its base dependencies.
COPYLEFT = {"synapse": "matrix-synapse", "negmas": "negmas", "negmas_genius_agents": "negmas-genius-agents"}


def test_no_copyleft_package_is_imported_by_haggler_or_required_by_it():
    import ast

    for module in sorted((ROOT / "src" / "haggler").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                assert name.split(".")[0] not in COPYLEFT, f"{module.relative_to(ROOT)} imports {name}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = " ".join(project["dependencies"])
    assert not any(package in required for package in COPYLEFT.values())
    assert project["optional-dependencies"]["matrix-homeserver"] == ["matrix-synapse>=1.146"]
    # NegMAS and the ANAC agents: the benchmark-only extra of benchmarks/anac.py, kept out of `test`.
    assert project["optional-dependencies"]["anac"] == ["negmas>=0.16.0", "negmas-genius-agents>=0.3.0"]
    assert not any("negmas" in r or "anac" in r for r in project["optional-dependencies"]["test"])


def test_check_install_refuses_a_dependency_without_a_lower_bound(tmp_path):
    check_install = load_script("check-install")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["fastapi>=0.115", "httpx"]\n')
    with pytest.raises(SystemExit, match="'httpx' needs exactly one '>=' lower bound"):
        check_install.lower_bounds(pyproject)


def test_the_package_data_globs_ship_every_data_file_the_matcher_reads():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["haggler"]
    package = ROOT / "src" / "haggler"
    for path in sorted((package / "data").iterdir()):
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), f"{relative} is not package data"
    check_install = load_script("check-install")
    assert all((ROOT / "src" / name).is_file() for name in check_install.REQUIRED_DATA)


def test_check_install_refuses_a_wheel_without_the_lexicon(tmp_path):
    check_install = load_script("check-install")
    wheel = tmp_path / "haggler-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("haggler/__init__.py", "")
        archive.writestr("haggler/data/WORDNET_LICENSE", "...")
    assert check_install.missing_data(wheel) == ["haggler/data/lexicon.json.gz"]


# -- scripts/ensure-venv, against a fake .venv whose python logs every pip call ------------------

FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    echo "$*" >> "$(dirname "$0")/../pip.log"
    [ -e "$(dirname "$0")/../pip-fails" ] && exit 1
    exit 0
fi
exec {python} "$@"
"""


@pytest.fixture
def checkout(tmp_path):
    """A copy of the scripts and pyproject.toml, with a .venv whose pip only logs what it was asked."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON.format(python=sys.executable)), ("haggler", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return tmp_path


def ensure(checkout: Path, extras: str) -> subprocess.CompletedProcess[str]:
    # No package index at all: an install attempt that reached the real pip would fail.
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    return subprocess.run(["bash", "scripts/ensure-venv", extras], cwd=checkout, capture_output=True, text=True,
                          timeout=60, env=env)


def pip_calls(checkout: Path) -> list[str]:
    log = checkout / ".venv" / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_ensure_venv_installs_once_then_only_when_pyproject_changes(checkout):
    assert ensure(checkout, "test").returncode == 0
    assert pip_calls(checkout) == ["-m pip install -q --disable-pip-version-check -e .[test]"]
    for _ in range(2):
        assert ensure(checkout, "test").returncode == 0
    assert len(pip_calls(checkout)) == 1  # a complete .venv: nothing to install, no index needed

    # test includes haggler[postgres], so serve's extra is in place already
    assert ensure(checkout, "postgres").returncode == 0
    assert len(pip_calls(checkout)) == 1

    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"rich>=13"', '"rich>=13.1"'))
    assert ensure(checkout, "postgres").returncode == 0
    assert pip_calls(checkout)[1:] == ["-m pip install -q --disable-pip-version-check -e .[postgres]"]


def test_ensure_venv_leaves_no_stamp_when_the_install_fails(checkout):
    (checkout / ".venv" / "pip-fails").touch()
    assert ensure(checkout, "postgres").returncode != 0
    assert not list((checkout / ".venv").glob(".haggler-installed-*"))
    (checkout / ".venv" / "pip-fails").unlink()
    assert ensure(checkout, "postgres").returncode == 0
    assert ensure(checkout, "postgres").returncode == 0
    assert len(pip_calls(checkout)) == 2  # the failed attempt, then the one that took
