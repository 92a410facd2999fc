"""docs/cli.md's help blocks, generated from the typer app: ``python scripts/cli_reference.py`` rewrites them.

Each ``<!-- cli-help: COMMAND -->`` marker of the page (``<!-- cli-help: -->`` for ``semzoo`` itself) is followed
by a ``text`` block holding ``semzoo COMMAND --help`` at a fixed width, so the page is the same on every machine.
tests/test_docs.py checks that the page matches the app; run this script after changing a command or a config field.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 100
"""Columns of the rendered help (click's default is the terminal's, at most 80)."""
MARKER = re.compile(r"(<!-- cli-help:(?: (?P<command>[a-z][a-z-]*))? -->\n)```text\n.*?```", re.S)
"""A marker and the help block under it; ``<!-- cli-help: -->`` (no command) is ``semzoo --help``'s."""
MARKER_START = "<!-- cli-help:"


def help_text(command: str) -> str:
    """``semzoo COMMAND --help`` (``semzoo --help`` for ""), as the app prints it at ``WIDTH`` columns."""
    from typer.testing import CliRunner

    from semzoo.cli import app

    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(app, args, prog_name="semzoo", terminal_width=WIDTH, max_content_width=WIDTH)
    if result.exit_code != 0:
        raise RuntimeError(f"semzoo {' '.join(args)} exited {result.exit_code}: {result.output}")
    return "\n".join(line.rstrip() for line in result.stdout.rstrip().splitlines())


def render(page: str) -> str:
    """``page`` with every marked block replaced by the app's current help text.

    ValueError for a marker that is not ``<!-- cli-help: COMMAND -->`` followed by a ``text`` block: such a block
    would silently stay as it is.
    """
    filled = [m.start() for m in MARKER.finditer(page)]
    unfilled = [page.count("\n", 0, at) + 1 for at in _find_all(page, MARKER_START) if at not in filled]
    if unfilled:
        raise ValueError(f"cli-help markers at lines {unfilled} are not '<!-- cli-help: COMMAND -->' (a lower-case "
                         "command, or none for `semzoo --help`) followed by a ```text block; fix them")
    return MARKER.sub(lambda m: f"{m[1]}```text\n{help_text(m['command'] or '')}\n```", page)


def _find_all(text: str, needle: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(needle), text)]


def main() -> int:
    old = PAGE.read_text()
    new = render(old)
    if new != old:
        PAGE.write_text(new)
        print(f"rewrote the help blocks of {PAGE}")
    else:
        print(f"{PAGE} matches the app")
    return 0


if __name__ == "__main__":
    sys.exit(main())
