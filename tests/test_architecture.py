"""The import layers of pyproject.toml's [tool.importlinter], checked by import-linter on the package as it is
installed: the top-level folders are mapped into `retriage` by setuptools' package-dir, so the tree is laid out
that way in a temporary folder first (an editable install hides the mapped folders from import-linter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def installed_layout(dest: Path) -> Path:
    """Copy every package's .py files to where an installed wheel would put them; returns the folder."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = cfg["tool"]["setuptools"]["package-dir"]
    for package in cfg["tool"]["setuptools"]["packages"]:
        top, *rest = package.split(".")
        source = ROOT / mapping[package] if package in mapping else ROOT / mapping[top] / Path(*rest)
        target = dest / Path(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for f in source.glob("*.py"):
            shutil.copy(f, target / f.name)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def lint(folder: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(folder))
    return subprocess.run([str(LINT), "--no-cache"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)


pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")


def test_layers_import_downwards_only(tmp_path):
    proc = lint(installed_layout(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken" in proc.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    folder = installed_layout(tmp_path)
    target = folder / "retriage" / "core" / "refs.py"
    target.write_text(target.read_text() + "\nfrom retriage.db import store  # noqa\n")
    proc = lint(folder)
    assert proc.returncode != 0
    assert "retriage.core.refs -> retriage.db.store" in proc.stdout
