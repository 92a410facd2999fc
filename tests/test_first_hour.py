"""What a new user meets first: a main command that can be run twice, and warnings instead of silent no-ops."""

from __future__ import annotations

import pytest
from conftest import NO_ACTOR

from semzoo import TrainConfig, train
from semzoo.config import LearnerConfig, MemoryConfig


def tiny(out, **kw) -> TrainConfig:
    base = dict(env="matrix:climbing", algo="vdn", steps=64, n_envs=4, test_episodes=4, test_interval=10**9,
                log_interval=32, out=str(out), device="cpu", learner=LearnerConfig(batch_size=4, buffer_size=16),
                **NO_ACTOR)
    return TrainConfig(**{**base, **kw})


def test_the_same_command_twice_writes_a_second_run_directory(tmp_path):
    first, _ = train(tiny(tmp_path), progress=False)
    second, _ = train(tiny(tmp_path), progress=False)
    # a suffix that reads as no seed range (`--seeds 0-2`)
    assert first.name == "matrix_climbing_vdn_seed0" and second.name == "matrix_climbing_vdn_seed0_run2"
    assert (first / "final.json").exists() and (second / "final.json").exists()


def test_an_explicit_run_name_that_holds_a_run_is_refused(tmp_path):
    train(tiny(tmp_path, run_name="mine"), progress=False)
    with pytest.raises(ValueError, match=r"already holds a run.*--resume"):
        train(tiny(tmp_path, run_name="mine"), progress=False)


def test_memory_whose_pending_set_never_fills_warns(tmp_path):
    with pytest.warns(UserWarning, match="pending_size=5000.*never written.*--pending-size"):
        train(tiny(tmp_path, algo="sem-vdn", memory=MemoryConfig(pending_size=5000)), progress=False)


def test_python_train_shows_progress_by_default_and_can_be_silenced(tmp_path, capsys):
    train(tiny(tmp_path, steps=400), progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[train]")]
    assert len(lines) >= 3
    assert "warming up" in lines[0] and "ETA" not in lines[0]  # no guess from the compile-heavy first iteration
    assert "steps/s" in lines[-1] and "ETA" in lines[-1]
    train(tiny(tmp_path, steps=400), progress=False)
    assert "[train]" not in capsys.readouterr().err


def test_without_a_terminal_progress_also_prints_on_time(tmp_path, capsys, monkeypatch):
    from semzoo.run import progress

    monkeypatch.setattr(progress, "PLAIN_LINE_INTERVAL_S", 0.0)  # a line at every iteration, whatever its steps
    train(tiny(tmp_path, steps=400), progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[train]")]
    assert len(lines) > 4 * progress.LINES_PER_RUN  # one-step episodes: far more iterations than tenths of the run


def test_progress_lines_come_every_tenth_or_every_interval_whichever_is_first(capsys):
    from semzoo.run.progress import ConsoleProgress

    now = [0.0]
    console = ConsoleProgress(1000, interval_s=60.0, clock=lambda: now[0])
    for steps, seconds in [(1, 1), (2, 30), (3, 61), (50, 62), (100, 63), (101, 64), (200, 200), (201, 201)]:
        now[0] = seconds
        console({"env_steps": steps, "epsilon": 1.0})
    printed = [int(line.split()[1].split("/")[0]) for line in capsys.readouterr().err.splitlines()]
    assert printed == [1, 3, 200]  # 3: 60 s after the line at 1; 200: 10 % after the line at 3, and 136 s later


def test_first_progress_line_names_jax_only_where_a_run_compiles_with_it(tmp_path, capsys):
    from semzoo.run.progress import one_off_work

    train(tiny(tmp_path, steps=64), progress=True)
    first = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("[train]"))
    assert "first iteration" in first and "JIT" not in first and "JAX" not in first
    assert "JAX compilation" in one_off_work(TrainConfig(env="smax:3m"))


def test_importing_the_smax_backend_prints_nothing():
    pytest.importorskip("jaxmarl")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import semzoo.envs.smax"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == ""


def test_envs_listing_is_aligned_and_shows_dashes_for_missing_sizes():
    from typer.testing import CliRunner

    from semzoo.cli import app

    out = CliRunner().invoke(app, ["envs"]).output
    assert "None" not in out
    table = [line for line in out.splitlines()
             if line.startswith("  ") and "backends" not in line and ("sc2" in line or "smax " in line)]
    header = next(line for line in out.splitlines() if "backends" in line)
    column = header.index("backends")
    assert len(table) > 20 and all(line[column - 1] == " " and line[column:column + 3] in ("sc2", "sma")
                                   for line in table)
    assert any("-/" in line for line in table)


@pytest.mark.ray
def test_a_local_sweep_prints_only_its_own_lines(tmp_path):
    pytest.importorskip("ray")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "sweep", "--envs", "matrix:climbing", "--algos", "vdn",
                           "--seeds", "1", "--steps", "64", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert all(line.startswith("sweep:") for line in done.stderr.splitlines()), done.stderr  # no Ray banners


def test_help_at_80_columns_shows_every_flag_name_in_full():
    import os
    import subprocess
    import sys

    from semzoo.cli import TRAIN_FLAGS

    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", "--help"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and "…" not in done.stdout
    for flag in TRAIN_FLAGS.values():
        assert flag in done.stdout, flag
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
