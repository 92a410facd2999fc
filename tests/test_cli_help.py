"""What a new user reads first: `semzoo --version`, and `semzoo train --help` in panels with every range stated."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

import semzoo
from semzoo.cli import app
from semzoo.config import RANGE, config_fields

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100
runner = CliRunner()


def help_of(*command: str, width: int = WIDTH) -> str:
    result = runner.invoke(app, [*command, "--help"], terminal_width=width, max_content_width=width)
    assert result.exit_code == 0, result.output
    return result.stdout


def option_help(text: str, flag: str) -> str:
    """The help of ``flag`` in a help page: its line and the indented lines under it, joined."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag + " ") or line.strip() == flag
                 or line.strip().startswith(flag + " /"))
    out = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 10) or line.strip().startswith("--"):
            break
        out.append(line)
    return " ".join(" ".join(out).split())


# ----- --version ------------------------------------------------------------------------------------------------------


def test_version_prints_the_packages_version_and_exits_0():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"semzoo {semzoo.__version__}"


def test_the_version_is_the_one_pyproject_declares_and_this_release_bumped_it():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert semzoo.__version__ == declared
    assert tuple(map(int, declared.split("."))) >= (0, 3, 0)


def test_the_console_command_prints_the_version():
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "--version"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"semzoo {semzoo.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["train", "--help"], ["envs"], ["algos"],
                                  ["memory-cost", "3m"], ["memory-cost", "matrix:climbing"]])
def test_help_version_the_listings_and_memory_cost_load_no_torch(args):
    """The CLI parses before it imports the training stack: help and the listings start in a fraction of torch's
    import time (scripts/bench_startup.py measures it)."""
    code = ("import sys; sys.argv = ['semzoo', *sys.argv[1:]]\n"
            "from semzoo.cli import main\n"
            "try:\n    main()\nexcept SystemExit as stop:\n    code = stop.code\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stderr.strip().splitlines()[-1] in ("NO-TORCH 0", "NO-TORCH None"), done.stderr


def test_algos_wraps_its_lines_to_the_help_width():
    result = CliRunner().invoke(app, ["algos"], terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert any(line.startswith("  --preset authors-sparse, lagma-<base>:") for line in lines)
    assert "aailabkaist/LAGMA" in result.stdout.replace("\n", " ")


# ----- train --help in panels ----------------------------------------------------------------------------------------

PANEL_HEADINGS = ["Run options", "Algorithm options", "Memory options", "EMC options", "EMU options",
                  "LAGMA options", "Curiosity options", "Learner options", "Exploration options", "Runtime options",
                  "Speed options", "Output options"]


def headings(text: str) -> list[str]:
    return [line.rstrip(":") for line in text.splitlines() if re.fullmatch(r"\S.* options( \(.*\))?:", line)]


@pytest.mark.parametrize("width", [80, WIDTH])
def test_train_help_groups_its_options_in_panels_in_order_and_cuts_no_flag(width):
    from semzoo.cli import TRAIN_FLAGS

    text = help_of("train", width=width)
    found = headings(text)
    assert [h.partition(" (")[0] for h in found[:len(PANEL_HEADINGS)]] == PANEL_HEADINGS, found
    assert "Options:" not in text.splitlines()  # no flat list besides the panels
    assert all(re.search(rf"(^|\s){flag}(\s|$)", text, re.M) for flag in TRAIN_FLAGS.values())


@pytest.mark.parametrize(("flag", "panel"), [
    ("--env", "Run"), ("--algo", "Run"), ("--steps", "Run"), ("--seeds", "Run"), ("--resume", "Run"),
    ("--preset", "Algorithm"), ("--hidden-dim", "Algorithm"), ("--qatten-heads", "Algorithm"),
    ("--lam", "Memory"), ("--memory-capacity", "Memory"), ("--emc-atol", "EMC"), ("--emu-delta", "EMU"),
    ("--curiosity-scale", "Curiosity"), ("--td-lambda", "Learner"), ("--epsilon-finish", "Exploration"),
    ("--runtime", "Runtime"), ("--n-envs", "Runtime"), ("--sequential", "Runtime"), ("--threads", "Speed"),
    ("--device", "Speed"), ("--out", "Output"), ("--keep-checkpoints", "Output"), ("--tensorboard", "Output"),
])
def test_each_flag_sits_in_its_panel(flag, panel):
    text = help_of("train")
    section = None
    for line in text.splitlines():
        if re.fullmatch(r"\S.* options( \(.*\))?:", line):
            section = line.partition(" options")[0]
        # an option's own line starts in the option column; a wrapped help line may also begin with a flag's name
        elif line.startswith(f"  {flag} ") or line.rstrip() == f"  {flag}":
            assert section == panel, f"{flag} is under {section!r}"
            return
    pytest.fail(f"{flag} not in train --help")


def test_every_config_field_has_a_named_panel():
    from semzoo.cli import OTHER_PANEL, TRAIN_FIELDS, panel_of

    assert [f.key for f in TRAIN_FIELDS if panel_of(f) == OTHER_PANEL] == []


@dataclass(frozen=True, kw_only=True)
class _Toy:
    size: int = 8


@dataclass(frozen=True, kw_only=True)
class _WithNewSection:
    steps: int = 1
    toy_memory: _Toy = field(default_factory=_Toy)


def test_a_new_config_section_gets_a_panel_named_after_it_without_edits():
    from semzoo.cli import PANEL_ORDER, panel_of, panel_rank

    [new] = [f for f in config_fields(_WithNewSection) if f.section == "toy_memory"]
    assert panel_of(new) == "TOY MEMORY"
    assert panel_rank("EMU") < panel_rank("TOY MEMORY") < panel_rank("Learner")
    assert "TOY MEMORY" not in PANEL_ORDER


@pytest.mark.parametrize("f", [f for f in config_fields() if RANGE in f.metadata], ids=lambda f: f.key)
def test_every_ranged_field_states_its_range_in_the_help(f):
    from semzoo.cli import TRAIN_FLAGS, range_text

    text = option_help(help_of("train", width=200), TRAIN_FLAGS[f.key])
    assert f"Range: {range_text(f.metadata[RANGE])}." in text, text


@pytest.mark.parametrize(("flag", "shown"), [("--td-lambda", "Range: [0, 1]."), ("--lam", "Range: [0, 1]."),
                                            ("--hidden-dim", "Range: >= 1."), ("--lr", "Range: > 0."),
                                            ("--wqmix-alpha", "Range: (0, 1]."),
                                            ("--emu-desirable-return", "Range: any finite number.")])
def test_ranges_read_as_intervals_or_bounds(flag, shown):
    assert shown in option_help(help_of("train", width=200), flag)


def test_help_text_states_no_anecdotes():
    text = option_help(help_of("train", width=200), "--threads")
    assert "10x" not in text and "box" not in text


@pytest.mark.parametrize(("command", "flag", "metavar"), [
    (("train",), "--env-arg", "KEY=VALUE"), (("memory-cost",), "--env-arg", "KEY=VALUE"),
    (("sweep",), "--set", "KEY=VALUE"), (("sweep",), "--grid", "KEY=V1,V2,..."),
])
def test_key_value_options_show_one_metavar(command, flag, metavar):
    text = help_of(*command, width=200)
    assert f"{flag} {metavar} " in text, text
    assert "list[str]" not in text


@pytest.mark.parametrize("command", ["train", "evaluate", "sweep", "plot", "table", "report", "memory-cost"])
def test_every_option_shows_its_placeholder_in_one_style(command):
    text = help_of(command, width=200)
    assert not re.search(r"--[\w-]+ <", text), re.findall(r"--[\w-]+ <[^>]*>", text)
    assert re.search(r"--[\w-]+ (INTEGER|FLOAT|TEXT|KEY=VALUE|DIR|NAME|STEP,STEP,\.\.\.)\s", text), text


def test_train_and_memory_cost_name_the_table_size_alike():
    assert "--memory-capacity" in help_of("train") and "--memory-capacity" in help_of("memory-cost")
    assert "--capacity" not in help_of("memory-cost").replace("--memory-capacity", "")


def test_resume_help_names_every_flag_that_applies():
    from semzoo.cli import RESUME_FLAGS, TRAIN_FLAGS

    text = option_help(help_of("train", width=200), "--resume")
    for key in RESUME_FLAGS:
        assert TRAIN_FLAGS[key] in text, (TRAIN_FLAGS[key], text)
    assert "--tensorboard" in text


def test_memory_costs_defaults_are_the_configs():
    """`semzoo memory-cost` prices the table `semzoo train` builds: its --memory-capacity and --proj-dim default to
    the config's, declared once."""
    from semzoo.cli.listing import memory_cost
    from semzoo.config import MemoryConfig

    params = {p.name: p.default.default for p in inspect.signature(memory_cost).parameters.values()}
    assert (params["capacity"], params["proj_dim"]) == (MemoryConfig().capacity, MemoryConfig().proj_dim)
