"""A sweep shows progress between its runs' ends: runs done, env steps logged across runs, rate and ETA."""

from __future__ import annotations

import pytest

from semzoo.run.progress import SweepProgress, duration_text
from semzoo.run.rundir import logged_steps
from semzoo.run.sweep import plan_trials, run_sweep

HEADER = "env_steps,episodes,updates,wall_time,name,value\n"


def write_metrics(run_dir, text: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.csv").write_text(text)


def test_logged_steps_reads_the_last_complete_row(tmp_path):
    assert logged_steps(tmp_path / "none") == 0
    write_metrics(tmp_path / "a", HEADER)
    assert logged_steps(tmp_path / "a") == 0
    write_metrics(tmp_path / "b", HEADER + "1000,10,9,3.5,loss,0.1\n2000,20,19,7.0,loss,0.05\n")
    assert logged_steps(tmp_path / "b") == 2000
    write_metrics(tmp_path / "c", HEADER + "1000,10,9,3.5,loss,0.1\n2000,20,1")  # a killed writer's half row
    assert logged_steps(tmp_path / "c") == 1000
    many = "".join(f"{s},1,1,1.0,loss,0.123456789\n" for s in range(0, 500_000, 100))
    write_metrics(tmp_path / "d", HEADER + many)
    assert logged_steps(tmp_path / "d") == 499_900  # read from the end of a long file


@pytest.mark.parametrize(("seconds", "text"), [(40, "40 s"), (720, "12 min"), (3 * 3600 + 5 * 60, "3 h 05 min")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_sweep_progress_counts_each_run_up_to_its_target_and_gives_rate_and_eta(tmp_path):
    now = [100.0]
    lines: list[str] = []
    runs = [(tmp_path / "a", 1000), (tmp_path / "b", 1000), (tmp_path / "c", 2000)]
    write_metrics(tmp_path / "a", HEADER + "1000,1,1,1.0,loss,0.1\n")  # resumed from a checkpoint at 1,000
    progress = SweepProgress(runs, lines.append, interval_s=60, clock=lambda: now[0])
    progress(0)
    assert lines == []  # not before the interval
    write_metrics(tmp_path / "a", HEADER + "1500,1,1,1.0,loss,0.1\n")  # past its target: counts 1,000
    write_metrics(tmp_path / "b", HEADER + "600,1,1,1.0,loss,0.1\n")
    now[0] += 60
    progress(1)
    assert lines == ["sweep: 1/3 runs done, 1,600/4,000 env steps (40 %), 10 env steps/s, ETA 4 min"]
    now[0] += 30
    progress(1)
    assert len(lines) == 1  # the next line waits another interval


def test_a_sweep_echoes_progress_lines_read_from_its_runs(tmp_path):
    pytest.importorskip("ray")
    trials = plan_trials(envs=["matrix:climbing"], algos=["vdn"], seeds=[0], steps=400, out=tmp_path,
                         overrides={"n_envs": 4, "log_interval": 20, "test_interval": 200, "test_episodes": 4,
                                    "sequential": True})
    lines: list[str] = []
    report = run_sweep(trials, num_cpus=1, echo=lines.append, progress_interval_s=0.0)
    assert report.finished == [trials[0].name]
    progress = [line for line in lines if "env steps (" in line]
    assert progress and progress[-1].startswith("sweep: 1/1 runs done, 400/400 env steps (100 %)")
