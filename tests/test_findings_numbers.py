"""The findings page (docs/results.md) and the README's result hold the tables the kept runs give.

``scripts/findings_tables.py`` prints each headline table from the runs under docs/results/; the pages paste them.
A table that a new kept run changes fails here until it is printed and pasted again.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "results.md"
FINDINGS_MAX_LINES = 400


def _script():
    spec = importlib.util.spec_from_file_location("findings_tables", ROOT / "scripts" / "findings_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _script().TABLES


@pytest.fixture(scope="module", params=sorted(TABLES))
def printed(request) -> tuple[str, str]:
    pytest.importorskip("rliable")
    return request.param, TABLES[request.param]()


def test_the_findings_page_holds_each_table_as_the_kept_runs_print_it(printed):
    name, table = printed
    assert table in FINDINGS.read_text(), f"docs/results.md: paste `python scripts/findings_tables.py {name}` again"


def test_the_readme_result_is_the_levels_table(printed):
    name, table = printed
    if name != "levels":
        pytest.skip("the README holds the levels table only")
    assert table in (ROOT / "README.md").read_text()


def test_each_table_has_rows_and_an_estimate_with_its_interval_in_each(printed):
    _, table = printed
    rows = [line.strip("|").split("|") for line in table.splitlines()[2:]]
    assert len(rows) >= 4
    for row in rows:
        cells = [cell.strip() for cell in row[1:]]
        assert any(re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\].*", cell) for cell in cells), row


def test_the_findings_page_fits_and_links_every_study_record():
    text = FINDINGS.read_text()
    assert len(text.splitlines()) <= FINDINGS_MAX_LINES
    studies = sorted(path.name for path in (ROOT / "docs" / "studies").glob("*.md"))
    index = (ROOT / "docs" / "studies" / "index.md").read_text()
    assert [name for name in studies if name != "index.md" and f"({name})" not in index] == []
    assert "studies/index.md" in text
