"""The findings page (docs/results.md) and the README's result hold the tables and figures the kept runs give.

``scripts/findings_tables.py`` prints each headline table from the runs under docs/results/; the pages paste them.
A table that a new kept run changes fails here until it is printed and pasted again. The figures of the page's claims
and prose (``--figures``) are each found on the page as the script words them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "results.md"
FINDINGS_MAX_LINES = 400


SCRIPT = load_script("findings_tables")
TABLES, PAGES = SCRIPT.TABLES, SCRIPT.PAGES


@pytest.fixture(scope="module", params=sorted(TABLES))
def printed(request) -> tuple[str, str]:
    pytest.importorskip("rliable")
    return request.param, TABLES[request.param]()


def test_each_page_holds_its_tables_as_the_kept_runs_print_them(printed):
    name, table = printed
    assert "docs/results.md" in PAGES[name]
    stale = [page for page in PAGES[name] if table not in (ROOT / page).read_text()]
    assert stale == [], f"run `python scripts/findings_tables.py {name} --paste`"


def test_the_findings_page_holds_each_figure_of_its_claims_and_prose_as_the_kept_runs_give_it():
    pytest.importorskip("rliable")
    page = " ".join(FINDINGS.read_text().split())  # the page wraps its lines anywhere
    figures = SCRIPT.figures()
    assert len(figures) >= 20
    missing = [f"{what}: {text}" for what, text in figures if text not in page]
    assert missing == [], "run `python scripts/findings_tables.py --figures` and word the page as it prints"


def test_the_readme_result_is_the_levels_table():
    assert PAGES["levels"] == ("docs/results.md", "README.md")


def test_paste_replaces_a_pages_table_in_place(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n| a | b |\n|---|---|\n| x | 1 |\n\ntext\n")
    assert SCRIPT.paste("| a | b |\n|---|---|\n| x | 2 |\n| y | 3 |", page)
    assert page.read_text() == "# t\n\n| a | b |\n|---|---|\n| x | 2 |\n| y | 3 |\n\ntext\n"
    assert not SCRIPT.paste("| c |\n|---|", page)


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
