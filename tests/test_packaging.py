"""The Pythons pyproject.toml declares are the ones checked: mypy and ruff at the lowest, `make test-pythons`
at the lowest and the highest."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def declared() -> tuple[str, str, dict]:
    """(lowest, highest, the parsed pyproject.toml): requires-python's floor and the highest version classifier."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floor = re.fullmatch(r">=(3\.\d+)", project["project"]["requires-python"])
    assert floor, f"requires-python {project['project']['requires-python']!r}: expected '>=3.N'"
    versions = [c.rsplit(" :: ", 1)[1] for c in project["project"]["classifiers"]
                if c.startswith("Programming Language :: Python :: 3.")]
    return floor[1], max(versions, key=lambda v: tuple(map(int, v.split(".")))), project


def makefile_value(name: str) -> str:
    match = re.search(rf"^{name} := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, f"Makefile has no '{name} := ...' line"
    return match[1]


def test_make_test_pythons_runs_the_lowest_and_the_highest_declared_python():
    lowest, highest, _ = declared()
    assert (makefile_value("PY_LOWEST"), makefile_value("PY_HIGHEST")) == (lowest, highest)
    assert "make test-pythons" in (ROOT / ".ci" / "run").read_text()


def test_mypy_and_ruff_check_as_the_lowest_declared_python():
    lowest, _, project = declared()
    assert project["tool"]["mypy"]["python_version"] == lowest
    assert project["tool"]["ruff"]["target-version"] == "py" + lowest.replace(".", "")
