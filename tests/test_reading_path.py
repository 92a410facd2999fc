"""docs/architecture.md's reading path of SEM-QMIX against the code.

The page lists, between ``<!-- reading-path -->`` and ``<!-- /reading-path -->``, the files a reader follows from
``semzoo train --algo sem-qmix`` to the loss and the episodic table, one numbered line each::

    4. `semzoo/run/trainer.py`: `Trainer._train` - Algorithm 1: ...

When the code moves, edit that list: these tests say which entry no longer holds (a file gone, a name it no longer
defines, a name a SEM-QMIX run never calls, or an entry no earlier entry leads to).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
ENTRY = re.compile(r"^(?P<number>\d+)\. `(?P<path>[\w/]+\.py)`: (?P<names>`[\w.]+`(?:, `[\w.]+`)*) - \S")
MIN_ENTRIES, MAX_ENTRIES = 5, 12
"""A reading path is short: a handful of files, not the run's whole call tree."""


@dataclass(frozen=True)
class Entry:
    number: int
    path: str
    names: tuple[str, ...]


def reading_path(page: str | None = None) -> list[Entry]:
    """The numbered entries between the page's reading-path markers, in order."""
    text = PAGE.read_text() if page is None else page
    start, end = text.index("<!-- reading-path -->"), text.index("<!-- /reading-path -->")
    entries = []
    for line in text[start:end].splitlines():
        if re.match(r"^\d+\. ", line):
            match = ENTRY.match(line)
            assert match, f"reading-path line {line!r} is not '<n>. `path.py`: `Name`, `Class.method` - what'"
            names = tuple(re.findall(r"`([\w.]+)`", match["names"]))
            entries.append(Entry(int(match["number"]), match["path"], names))
    return entries


def defined_names(path: Path) -> set[str]:
    """Module-level functions and classes of a file, and ``Class.method`` for each class's methods."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(f"{node.name}.{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names


def test_the_reading_path_is_a_short_numbered_list_of_distinct_files():
    entries = reading_path()
    assert MIN_ENTRIES <= len(entries) <= MAX_ENTRIES, f"{len(entries)} entries: the path should be short"
    assert [entry.number for entry in entries] == list(range(1, len(entries) + 1))
    paths = [entry.path for entry in entries]
    assert len(set(paths)) == len(paths), f"a file appears twice: {paths}"
    assert paths[0] == "semzoo/cli/training.py", "the path starts at `semzoo train`"


def test_each_file_of_the_reading_path_exists_and_defines_what_it_names():
    for entry in reading_path():
        path = ROOT / entry.path
        assert path.is_file(), f"entry {entry.number}: {entry.path} does not exist"
        missing = set(entry.names) - defined_names(path)
        assert not missing, f"entry {entry.number}: {entry.path} defines no {sorted(missing)}"


def test_a_reading_path_line_that_does_not_parse_is_an_error_not_a_skipped_entry():
    page = "<!-- reading-path -->\n1. semzoo/algos.py: build - no code spans\n<!-- /reading-path -->\n"
    with pytest.raises(AssertionError, match="is not"):
        reading_path(page)


def code_objects(entry: Entry) -> set[types.CodeType]:
    """The code of each name of an entry; a class's name stands for every method defined in its body."""
    module = importlib.import_module(entry.path.removesuffix(".py").replace("/", "."))
    codes = set()
    for name in entry.names:
        obj: Any = module
        for part in name.split("."):
            obj = inspect.getattr_static(obj, part)
        obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        members = [member for member in vars(obj).values() if inspect.isfunction(member)] if inspect.isclass(obj) \
            else [obj]
        codes.update(inspect.unwrap(member).__code__ for member in members)
    return codes


def test_each_entry_runs_in_a_tiny_sem_qmix_run_reached_from_an_earlier_entry(tmp_path):
    """``semzoo train --algo sem-qmix`` on the two-step game through the CLI, long enough for the table's writes and
    a few updates: when an entry's code first runs, the innermost file of another entry on the call stack is an
    earlier entry's, so the list reads from caller to callee.
    """
    from semzoo.cli import app

    entries = reading_path()
    files = {str((ROOT / entry.path).resolve()): entry.number for entry in entries}
    codes = {code: entry.number for entry in entries for code in code_objects(entry)}
    reached: dict[int, int] = {}
    """entry -> the entry whose file was the innermost other entry's file on the stack at its first call (0: none)"""

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        number = codes.get(frame.f_code) if event == "call" else None
        if number is None or number in reached:
            return
        caller = frame.f_back
        while caller is not None and files.get(caller.f_code.co_filename, number) == number:
            caller = caller.f_back
        reached[number] = 0 if caller is None else files[caller.f_code.co_filename]

    args = ["train", "--env", "matrix:two_step", "--algo", "sem-qmix", "--steps", "200", "--pending-size", "50",
            "--batch-size", "8", "--keep-checkpoints", "0", "--no-tensorboard", "--out", str(tmp_path)]
    sys.setprofile(profile)
    try:
        result = CliRunner().invoke(app, args)
    finally:
        sys.setprofile(None)
    assert result.exit_code == 0, result.output
    never = [entry.number for entry in entries if entry.number not in reached]
    assert not never, f"entries {never} never ran in a tiny `semzoo train --algo sem-qmix` run"
    called_from = {entry.number: reached[entry.number] for entry in entries[1:]}
    later = {number: caller for number, caller in called_from.items() if not 0 < caller < number}
    assert not later, (f"entry -> the entry it was first called from, where that is not an earlier one: {later}; "
                       "reorder the list so that each file comes after the one that calls it")
