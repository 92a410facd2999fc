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
    assert first.name == "matrix_climbing_vdn_seed0" and second.name == "matrix_climbing_vdn_seed0-2"
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
