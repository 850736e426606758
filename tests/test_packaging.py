"""The sdist carries its tests with their data (a golden file read from the unpacked sdist
must be there), built with setuptools' own PEP 517 hook."""

import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_sdist_ships_the_tests_with_their_data(tmp_path, monkeypatch):
    from setuptools import build_meta

    monkeypatch.chdir(ROOT)
    name = build_meta.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for f in ("tests/data/env_golden.json", "tests/data/drive_golden.json", "tests/conftest.py",
              "tests/test_golden.py", "configs/ppo.yml", "agents/evaluate.py", "dyn4_gym/data/README.md"):
        assert f in names, f
    assert not any(n.endswith(".pyc") for n in names)


def test_the_console_commands_are_installed():
    import shutil
    import subprocess

    import os
    import sysconfig

    for cmd in ("dyn4-gym", "dyn4-gym-demo"):
        # where pip puts this interpreter's console scripts (a PATH shim, pyenv's say, may lag behind)
        path = os.path.join(sysconfig.get_path("scripts"), cmd)
        path = path if os.path.exists(path) else shutil.which(cmd)
        assert path is not None, f"{cmd} is not installed (pip install -e . installs it)"
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "usage:" in r.stdout


def test_the_version_is_written_once_and_the_citation_and_changelog_agree():
    """Issue 47's housekeeping: pyproject reads the version from ``dyn4_gym.__version__``; the
    installed metadata, CITATION.cff and the changelog's existence follow it."""
    import importlib.metadata
    import pathlib

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    yaml = pytest.importorskip("yaml")

    import dyn4_gym

    root = pathlib.Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dyn4_gym.__version__"}
    assert importlib.metadata.version("dyn4-gym") == dyn4_gym.__version__
    cff = yaml.safe_load((root / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == dyn4_gym.__version__
    assert {"title", "authors", "message", "license"} <= set(cff)
    assert (root / "CHANGELOG.md").read_text().startswith("# Changelog")
