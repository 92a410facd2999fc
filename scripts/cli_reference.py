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
MARKER = re.compile(r"(<!-- cli-help: (?P<command>[a-z-]*) -->\n)```text\n.*?```", re.S)


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
    """``page`` with every marked block replaced by the app's current help text."""
    return MARKER.sub(lambda m: f"{m[1]}```text\n{help_text(m['command'])}\n```", page)


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
