"""The front door stays true: the README's size, `semzoo --help`'s command list, docs/cli.md's help blocks, and the
size of the docs' hand-written pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semzoo.cli import app

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
PAGE_MAX_LINES = 300
"""A hand-written page of docs/ is one kind (tutorial, how-to, reference, explanation) and fits this; longer ones split."""
RECORDS = ("studies", "results")
"""docs/ folders of records (the studies' pages, the kept runs' reports), exempt from PAGE_MAX_LINES."""
MEMORIES = ("SEM", "SAEM", "EMC", "EMU")


def test_the_readme_fits_one_screenful_of_sections():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move detail to docs/"
    assert "![" in (ROOT / "README.md").read_text()  # the headline figure


def test_semzoo_help_lists_every_command_with_its_whole_first_line():
    result = CliRunner().invoke(app, ["--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    commands = result.stdout.split("Commands:")[1].strip().splitlines()
    assert len(commands) >= 9
    for line in commands:
        name, _, summary = line.strip().partition(" ")
        assert summary.strip().endswith(".") and not summary.strip().endswith("..."), f"{name}: {summary!r} is cut"
    assert all(memory in result.stdout for memory in MEMORIES)


def test_the_cli_page_shows_the_apps_current_help():
    """In a fresh process, so that what other tests register does not show up in the help."""
    code = ("import sys; sys.path.insert(0, 'scripts'); from cli_reference import PAGE, render; "
            "page = PAGE.read_text(); sys.exit(0 if render(page) == page else 1)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert done.returncode == 0, ("docs/cli.md's help blocks differ from the app: run python scripts/cli_reference.py"
                                  f"\n{done.stderr[-2000:]}")
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page.count("<!-- cli-help: ") >= 10  # the app and its 9 commands
    assert "generated from the CLI" in "\n".join(page.splitlines()[:4]), "docs/cli.md's first lines say it is generated"


def cli_reference():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import cli_reference
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return cli_reference


def test_the_generator_fills_the_apps_own_help_block_and_each_commands():
    reference = cli_reference()
    page = "<!-- cli-help: -->\n```text\n```\n\n<!-- cli-help: envs -->\n```text\nstale\n```\n"
    rendered = reference.render(page)
    assert "```text\nUsage: semzoo [OPTIONS] COMMAND [ARGS]...\n" in rendered, rendered
    assert "```text\nUsage: semzoo envs [OPTIONS]\n" in rendered and "stale" not in rendered


@pytest.mark.parametrize("page", ["<!-- cli-help: -->\nno block\n", "<!-- cli-help: train-->\n```text\n```\n",
                                  "<!-- cli-help: Train -->\n```text\n```\n"])
def test_a_marker_the_generator_cannot_fill_is_an_error_not_a_silent_pass(page):
    with pytest.raises(ValueError, match="cli-help"):
        cli_reference().render(page)


def test_the_site_home_shows_the_readmes_tested_example():
    """docs/index.md repeats the README's first python block (which tests/test_readme.py runs), word for word."""
    from test_readme import readme_examples

    readme_first = next(text for kind, text in readme_examples() if kind == "python")
    home = [text for kind, text in readme_examples(ROOT / "docs" / "index.md") if kind == "python"]
    assert home == [readme_first]


def test_the_readme_states_no_test_count_that_goes_stale():
    import re

    text = (ROOT / "README.md").read_text()
    assert not re.search(r"[\d,]+ (tests )?(passed|skipped)|the [\d,]+ tests", text), "a test count goes stale: drop it"


def test_the_readme_and_the_site_home_give_the_install_line_with_the_default_jobs_extra():
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        text = page.read_text()
        assert 'pip install ".[smax]"' in text and "semzoo[smax]" in text, page.name
        assert "trains on SMAX" in text, page.name


def hand_written_lines(page: str) -> int:
    """The page's lines less those of the help blocks that scripts/cli_reference.py generates (marker and block)."""
    generated = sum(block.group(0).count("\n") + 1 for block in cli_reference().MARKER.finditer(page))
    return len(page.splitlines()) - generated


def test_no_hand_written_page_of_the_docs_exceeds_300_lines():
    pages = [path for path in (ROOT / "docs").rglob("*.md")
             if path.relative_to(ROOT / "docs").parts[0] not in RECORDS]
    assert len(pages) >= 10 and ROOT / "docs" / "cli.md" in pages
    long = {str(path.relative_to(ROOT)): hand_written_lines(path.read_text()) for path in pages}
    long = {name: lines for name, lines in long.items() if lines > PAGE_MAX_LINES}
    assert not long, (f"pages over {PAGE_MAX_LINES} hand-written lines: {long}; split each into pages of one kind, "
                      "and move dated measurements to a record under docs/studies/")


def test_the_line_count_leaves_out_only_the_generated_help_blocks():
    page = "# t\n\nprose\n<!-- cli-help: envs -->\n```text\na\nb\n```\nmore prose\n"
    assert hand_written_lines(page) == 4


def test_make_demo_runs_the_main_job_with_the_flags_measure_demo_times():
    """`make demo` is `semzoo train` with scripts/measure_demo.py's DEMO_ARGS, so the README's timing is of it."""
    from script_modules import load_script

    recipe = (ROOT / "Makefile").read_text().split("\ndemo: install\n")[1].splitlines()[0].split()
    assert recipe == ["$(BIN)/semzoo", "train", *load_script("measure_demo").DEMO_ARGS]


def test_the_plugin_page_is_in_the_site_and_names_every_field_a_hook_receives():
    import dataclasses

    from semzoo.episodic.target import EpisodicTarget
    from semzoo.types import CleanBatch, EpisodeBatch, OnlineValues

    page = (ROOT / "docs" / "plugins.md").read_text()
    assert "plugins.md" in (ROOT / "mkdocs.yml").read_text() and len(page.splitlines()) < 300
    for kind in (EpisodeBatch, CleanBatch, OnlineValues, EpisodicTarget):
        missing = [f.name for f in dataclasses.fields(kind) if f"`{f.name}`" not in page]
        assert missing == [], f"docs/plugins.md does not name {kind.__name__}'s fields {missing}"
    for imported in ("from semzoo.config import NON_NEGATIVE, Range, ranged",
                     "from semzoo.episodic.target import EpisodicTarget, applying"):
        assert imported in page
        exec(imported, {})  # the import the page shows works
