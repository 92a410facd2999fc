"""scripts/keep_runs.py: a study's finished runs kept as docs/results keeps them, with a summary line each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_protocol import train_two_step_runs

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "keep_runs.py"


def keep(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False)


def test_finished_runs_are_kept_with_their_absolute_metric_and_summary_unfinished_ones_left(tmp_path):
    study, dest = tmp_path / "study", tmp_path / "kept"
    train_two_step_runs(study)
    runs = sorted(p for p in study.iterdir() if p.is_dir())
    (runs[0] / "final.json").unlink()  # as a run stopped part-way
    result = keep(study, dest, "--at", "40,120")
    assert result.returncode == 0, result.stderr
    assert f"{runs[0].name}: not finished, left alone" in result.stdout
    assert not (dest / runs[0].name).exists()
    for run in runs[1:]:
        kept = dest / run.name
        assert sorted(p.name for p in kept.iterdir()) == ["absolute.json", "config.json", "final.json", "metrics.csv",
                                                          "provenance.json"]
        absolute = json.loads((kept / "absolute.json").read_text())
        minutes = json.loads((kept / "final.json").read_text())["wall_time"] / 60
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"{run.name}: kept"))
        summary = result.stdout.splitlines()[result.stdout.splitlines().index(line) + 1]
        # No win rate on a matrix game: the summary is the test return, at each --at step.
        assert summary.startswith("  test_return_mean ") and " at 40, " in summary and " at 120; " in summary
        assert summary.endswith(f"absolute {absolute['test_return_mean']:.2f} (agent of {absolute['step']:,}); "
                                f"{minutes:.0f} min")
    again = keep(study, dest)
    assert again.stdout.count("already kept") == len(runs) - 1


def test_a_run_made_before_provenance_json_is_kept_without_it(tmp_path):
    study, dest = tmp_path / "study", tmp_path / "kept"
    train_two_step_runs(study)
    runs = sorted(p for p in study.iterdir() if p.is_dir())
    (runs[0] / "provenance.json").unlink()
    result = keep(study, dest, "--at", "40")
    assert result.returncode == 0, result.stderr
    assert not (dest / runs[0].name / "provenance.json").exists() and (dest / runs[1].name / "provenance.json").exists()


def test_a_bad_at_is_a_usage_error_naming_it(tmp_path):
    study = tmp_path / "study"
    train_two_step_runs(study)
    result = keep(study, tmp_path / "kept", "--at", "250k")
    assert result.returncode == 2
    assert "--at '250k': expected comma-separated env-step counts" in result.stderr


def test_a_bad_thread_count_is_a_usage_error_naming_it(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    result = keep(study, tmp_path / "kept", "--threads", "0")
    assert result.returncode == 2
    assert "--threads 0: expected a positive number of threads" in result.stderr
