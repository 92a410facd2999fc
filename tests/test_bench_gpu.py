"""scripts/bench_gpu.py: start-up, steady env steps/s of one run and of a group, ms per update, time shares.

It runs on the CPU as on a GPU; here with tiny settings on the two-step matrix game.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_gpu.py"
TINY = ["--env", "matrix:two_step", "--algo", "sem-qmix", "--steps", "240", "--n-envs", "4", "--rounds", "1",
        "--calls", "1", "--device", "cpu"]


def bench(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(tmp_path)], capture_output=True,
                          text=True, check=False, timeout=600)


def test_bench_gpu_prints_the_figures_of_one_run_and_of_a_group(tmp_path):
    done = bench(*TINY, "--seeds", "2", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    for label in ("start-up", "env steps/s", "time shares", "ms per update"):
        assert any(line.startswith(label) for line in lines), label
    figures = json.loads(lines[-1])
    assert figures["device"] == "cpu" and figures["runs"] == 2 and figures["single_loop"] == "sequential"
    for name in ("startup_s_single", "startup_s_group", "steps_per_s_single", "steps_per_s_group",
                 "ms_update_single", "ms_update_stacked"):
        assert figures[name] > 0, name
    for name in ("share_single", "share_group"):  # the collect-then-learn loop: the three parts make the whole
        share = figures[name]
        assert 0 < share["collect"] < 1 and 0 < share["update"] < 1 and share["rest"] >= 0
        assert share["collect"] + share["update"] + share["rest"] == pytest.approx(1.0, abs=1e-6)
    # the env calls of the K runs, one by one (the matrix game has no grouped call)
    assert figures["ms_env_step_per_run"] > 0 and figures["ms_env_reset_per_run"] > 0
    assert figures["ms_env_step_together"] is None and figures["ms_env_reset_together"] is None
    assert any(line.startswith("ms per env reset of the 2 runs: one by one ") for line in lines)
    # the runs were real: each logged its windows and finished its steps
    assert len(list((tmp_path / "group").iterdir())) == 2


def test_bench_gpu_with_one_seed_measures_the_single_run_only(tmp_path):
    done = bench(*TINY, "--seeds", "1", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["steps_per_s_single"] > 0 and figures["ms_update_single"] > 0
    assert figures["steps_per_s_group"] is None and figures["ms_update_stacked"] is None


@pytest.mark.parametrize(("args", "says"), [(["--seeds", "0"], "--seeds 0"),
                                            (["--device", "cuda:99"], "device 'cuda:99'")])
def test_bench_gpu_refuses_bad_settings_in_one_line(tmp_path, args, says):
    done = bench(*TINY, *args, tmp_path=tmp_path)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
