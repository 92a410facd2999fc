"""The front door stays true: the README's size, `semzoo --help`'s command list, and docs/cli.md's help blocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semzoo.cli import app

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
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
    assert (ROOT / "docs" / "cli.md").read_text().count("<!-- cli-help: ") >= 10  # the app and its 9 commands


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
