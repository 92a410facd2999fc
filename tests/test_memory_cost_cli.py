"""`semzoo memory-cost`: the paper's storage numbers, semzoo's allocation, and one-line errors."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.episodic.sem import make_episodic_memory
from semzoo.episodic.setup import MemorySetup

runner = CliRunner()
PAPER_MAPS = ("1c3s5z", "2s_vs_1sc", "2s3z", "3s5z", "27m_vs_30m", "2c_vs_64zg", "MMM2", "bane_vs_bane")


def invoke(*args: str):
    return runner.invoke(app, ["memory-cost", *args])


def row(output: str, kind: str) -> str:
    (line,) = [ln for ln in output.splitlines() if ln.startswith(kind + " ")]
    return line


def test_paper_numbers_for_2c_vs_64zg():
    """Paper sec. 6: SEM 0.029 GB; SAEM 142 GB for 70^2 tables."""
    result = invoke("2c_vs_64zg")
    assert result.exit_code == 0, result.output
    assert "n = 2 agents, |U| = 70 actions, state size F = 342" in result.output
    assert "1 table: 0.029 GB" in row(result.output, "SEM")
    assert "70^2 = 4,900 tables: 142 GB" in row(result.output, "SAEM")


def test_paper_numbers_for_27m_vs_30m():
    """Paper sec. 6: 36^27 ~ 1e42 tables, 3e40 GB."""
    result = invoke("27m_vs_30m")
    assert result.exit_code == 0, result.output
    saem = row(result.output, "SAEM")
    assert "36^27 = 1.05e+42 tables" in saem
    gb = float(re.search(r"tables: (\S+) GB", saem).group(1))
    assert 2.5e40 < gb < 3.5e40


@pytest.mark.parametrize("name", PAPER_MAPS)
def test_every_map_of_the_paper_works_without_starcraft(name):
    result = invoke(name)
    assert result.exit_code == 0, result.output
    assert f"SMAC map {name}" in result.output


def test_semzoo_column_is_what_a_built_table_allocates():
    result = invoke("--agents", "3", "--actions", "5", "--state-size", "10", "--memory-capacity", "2000", "--proj-dim", "6")
    assert result.exit_code == 0, result.output
    for kind in ("sem", "saem"):
        nbytes = make_episodic_memory(kind, state_dim=10, n_agents=3, capacity=2000, proj_dim=6).nbytes
        assert f"({nbytes:,} bytes)" in row(result.output, kind.upper())
    assert "5^3 = 125 tables" in row(result.output, "SAEM")
    assert "D x F = 6 x 10 float64 = 480 bytes" in result.output


def test_env_id_is_read_through_the_ctde_adapter():
    result = invoke("matrix:two_step")
    assert result.exit_code == 0, result.output
    assert "n = 2 agents, |U| = 2 actions, state size F = 4" in result.output
    assert "2^2 = 4 tables" in row(result.output, "SAEM")


def test_capacity_accepts_scientific_notation():
    result = invoke("2s3z", "--memory-capacity", "1e4")
    assert result.exit_code == 0, result.output
    assert "|Q| = 10,000 entries" in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("not_a_map",), "unknown map 'not_a_map'"),
        (("nope:thing",), "unknown env id 'nope:thing'"),
        (("2s3z", "--agents", "3"), "not both"),
        (("--agents", "3"), "missing --actions, --state-size"),
        ((), "missing --agents, --actions, --state-size"),
        (("--agents", "0", "--actions", "3", "--state-size", "4"), "n_agents=0"),
        (("--agents", "2", "--actions", "3", "--state-size", "0"), "--state-size 0"),
        (("2s3z", "--memory-capacity", "1.5"), "--memory-capacity 1.5"),
        (("2s3z", "--proj-dim", "0"), "proj_dim=0"),
    ],
)
def test_bad_input_is_a_one_line_usage_error(args, needle):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert needle in text
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text


def test_memory_cost_reads_the_sizes_of_a_registered_env():
    from semzoo import register_env
    from semzoo.envs import matrix_game_v0
    from semzoo.episodic.cost import sizes_of

    register_env("memory_cost_penalty", lambda: matrix_game_v0.parallel_env("penalty"), overwrite=True)
    assert sizes_of("memory_cost_penalty") == (2, 3, 2, 2, "env memory_cost_penalty")


def test_the_replay_buffers_state_keys_are_reported_per_slot():
    result = invoke("2c_vs_64zg", "--proj-dim", "8")
    assert result.exit_code == 0, result.output
    assert "state keys in the replay buffer: D int32 = 32 bytes per slot" in result.output


def test_every_registered_memory_is_reported_with_what_the_memory_plan_counts():
    from semzoo.config import MemoryConfig, TrainConfig
    from semzoo.episodic.memory import memory_class, memory_names

    result = invoke("--agents", "3", "--actions", "5", "--state-size", "10", "--obs-size", "7", "--memory-capacity", "2000")
    assert result.exit_code == 0, result.output
    for name in memory_names():
        config = TrainConfig(algo=f"{name}-qmix", memory=MemoryConfig(capacity=2000))  # with its own settings
        nbytes = memory_class(name).planned_nbytes(MemorySetup.of(config, state_dim=10, n_agents=3, n_actions=5, obs_dim=7))
        # mc (the own-return ablation) keeps nothing; a test's plugin memory may plan nothing either
        assert nbytes > 0 or name == "mc" or not memory_class(name).__module__.startswith("semzoo."), name
        (line,) = [ln for ln in result.output.splitlines() if ln.startswith(f"  {name} ")]
        assert f"({nbytes:,} bytes)" in line


def test_obs_size_goes_with_explicit_sizes_only():
    result = invoke("2s3z", "--obs-size", "7")
    assert result.exit_code == 2, result.output
    assert "drop --obs-size" in result.output.strip()
    assert len(result.output.strip().splitlines()) == 1


CAPACITY_COMMANDS = {"memory-cost": ["memory-cost", "3m"],
                     "train": ["train", "--env", "matrix:two_step", "--algo", "sem-qmix", "--steps", "10"]}


@pytest.mark.parametrize(("command", "value"), [("memory-cost", "1e18"), ("train", "1e18"), ("train", "inf"),
                                              ("train", "nan")])
def test_a_capacity_beyond_any_machine_is_one_usage_error_within_seconds(command, value, tmp_path):
    """In a subprocess with a timeout (the table's size once came from a trial-division search that never ended), through
    the console entry point, which gives click's usage errors as one line."""
    import subprocess
    import sys
    import time

    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", *CAPACITY_COMMANDS[command], "--memory-capacity", value],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("Error: "), done.stderr
    assert "capacity" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - start < 60


@pytest.mark.parametrize(("command", "value"), [("memory-cost", "inf"), ("memory-cost", "nan"), ("memory-cost", "-inf"),
                                              ("memory-cost", "1e30"), ("train", "1000000000000000000")])
def test_a_capacity_that_is_no_count_is_one_usage_error(command, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*CAPACITY_COMMANDS[command], "--memory-capacity", value])
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1 and "capacity" in text, text
    assert "Traceback" not in text and "cannot convert" not in text


def test_the_bucket_count_is_the_first_prime_and_quick_at_the_largest_capacity():
    import math
    import time

    from semzoo.config import MAX_MEMORY_CAPACITY
    from semzoo.episodic.tables import n_buckets_for

    def first_prime_by_trial_division(capacity: int) -> int:
        n = max(2, math.ceil(capacity * 1.2 / 16))
        while not (n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))):
            n += 1
        return n

    for capacity in (*range(1, 400), 1_000_000, 4_194_304, 10**9 + 7, 10**11):
        assert n_buckets_for(capacity) == first_prime_by_trial_division(capacity), capacity
    start = time.monotonic()
    assert n_buckets_for(MAX_MEMORY_CAPACITY) == 75_000_000_001  # the first prime >= 1e12 * 1.2 / 16
    assert time.monotonic() - start < 1.0
    for bad in (MAX_MEMORY_CAPACITY + 1, 0, float("inf"), float("nan"), 2.5):
        with pytest.raises(ValueError, match="--memory-capacity"):
            n_buckets_for(bad)  # type: ignore[arg-type]
