"""The README's and docs/cli.md's examples run as written, and print no warning: every bash line that calls
`semzoo` and every python block.

Blocks preceded by ``<!-- readme-test: skip, <reason> -->`` are not run (the set-up commands, the test
suite itself, a cluster sweep); every other bash line must start with ``semzoo``. The commands run in
order in one empty folder, so later examples (resume, evaluate, plot) read the runs earlier ones wrote.
An example that prints a warning (a Python warning, or semzoo's own ``Warning:`` lines) fails: the first
thing a user runs must not need explaining.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
POLICY_DOC = README.parent / "docs" / "policy.md"
CLI_DOC = README.parent / "docs" / "cli.md"
WARNING = re.compile(r"warn", re.I)
"""What a printed warning contains: Python's ``UserWarning: ...`` lines, semzoo's ``Warning: ...``, loggers' ``WARNING``."""
BLOCK = re.compile(r"(?P<skip><!-- readme-test: skip, [^>]+ -->\n)?```(?P<lang>bash|python)\n(?P<body>.*?)```", re.S)
COMMAND_TIMEOUT_S = 600


def readme_examples(doc: Path = README) -> list[tuple[str, str]]:
    """("bash", one command line) and ("python", one block), in the doc's order, skipped blocks left out."""
    examples = []
    for block in BLOCK.finditer(doc.read_text()):
        if block["skip"]:
            continue
        if block["lang"] == "python":
            examples.append(("python", block["body"]))
            continue
        for line in block["body"].splitlines():
            if line.strip():
                examples.append(("bash", line))
    return examples


def run_example(kind: str, text: str, cwd: Path, doc: Path) -> None:
    """Run one example in ``cwd``; fail on a non-zero exit or on a warning it prints."""
    if kind == "python":
        command = [sys.executable, "-c", text]
    else:
        argv = shlex.split(text, comments=True)
        assert argv[0] == "semzoo", f"{doc.name} bash line {text!r} does not call semzoo: mark its block as skipped"
        command = [sys.executable, "-m", "semzoo.cli", *argv[1:]]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, f"{doc.name} example failed ({kind}):\n{text}\n--- stderr ---\n{done.stderr[-3000:]}"
    warned = [line for line in (done.stderr + done.stdout).splitlines() if WARNING.search(line)]
    assert not warned, f"{doc.name} example printed a warning ({kind}):\n{text}\n--- warning ---\n" + "\n".join(warned)


def test_the_readme_and_the_cli_page_have_examples_of_every_command():
    examples = readme_examples() + readme_examples(CLI_DOC)
    commands = {shlex.split(line, comments=True)[1] for kind, line in examples if kind == "bash"}
    assert {"train", "evaluate", "sweep", "plot", "table", "report", "algos", "envs", "memory-cost"} <= commands


@pytest.mark.slow
def test_every_readme_example_runs_as_written_without_a_warning(tmp_path):
    pytest.importorskip("jaxmarl")
    for kind, text in readme_examples():
        run_example(kind, text, tmp_path, README)


@pytest.mark.slow
def test_every_cli_page_example_runs_as_written_without_a_warning(tmp_path):
    pytest.importorskip("jaxmarl")
    pytest.importorskip("mpe2")
    pytest.importorskip("ray")
    pytest.importorskip("matplotlib")
    pytest.importorskip("rliable")
    for kind, text in readme_examples(CLI_DOC):
        run_example(kind, text, tmp_path, CLI_DOC)


@pytest.mark.slow
def test_every_policy_doc_example_runs_as_written(tmp_path):
    """docs/policy.md follows the README's convention: its python blocks run unless marked as skipped."""
    pytest.importorskip("jaxmarl")
    pytest.importorskip("supersuit")
    examples = readme_examples(POLICY_DOC)
    assert [kind for kind, _ in examples] == ["python", "python"]  # the SuperSuit examples, one per format
    for _, text in examples:
        done = subprocess.run([sys.executable, "-c", text], cwd=tmp_path, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        assert done.returncode == 0, f"docs/policy.md example failed:\n{text}\n--- stderr ---\n{done.stderr[-3000:]}"
