"""What shows a memory acting: merge and cross-hit rates in every table memory's metrics, EMU's incentive apart from
its curiosity, the report's table of them, and SMAX with fixed starts (where states repeat)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from semzoo import TrainConfig, train
from semzoo.analysis.memory_use import SELF_HIT_LIMIT, MemoryUse, memory_use
from semzoo.analysis.report import load_runs
from semzoo.cli import app
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.episodic.settings import LAGMASettings

STEPS = 400


def _names(run_dir: Path) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    with (run_dir / "metrics.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            rows.setdefault(row["name"], []).append(float(row["value"]))
    return rows


def _train(algo: str, out: Path, seed: int = 0) -> Path:
    # LAGMA's codebook from the first update, its latent within the two-step game's 4 state features
    lagma = LAGMASettings(lagma_latent_dim=2, lagma_start_steps=0, lagma_codebook_interval=1, lagma_top_k=2)
    config = TrainConfig(env="matrix:two_step", algo=algo, steps=STEPS, seed=seed, n_envs=4, test_interval=200,
                         test_episodes=2, log_interval=100, save_interval=0, sequential=True, out=str(out),
                         memory=MemoryConfig(pending_size=40, capacity=1000),
                         learner=LearnerConfig(batch_size=4, buffer_size=32),
                         components={"lagma": lagma} if algo.startswith("lagma-") else {})
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return Path(run_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("diagnostics")
    return {algo: _train(algo, out)
            for algo in ("sem-qmix", "saem-qmix", "emc-qmix", "emu-qmix", "lagma-qmix", "mc-qmix", "qmix")}


@pytest.mark.parametrize("algo", ["sem-qmix", "saem-qmix", "emc-qmix", "emu-qmix"])
def test_table_memories_log_merge_and_cross_hit_rates(runs, algo):
    rows = _names(runs[algo])
    merge, cross = rows["memory_merge_rate"], rows["memory_cross_hit_rate"]
    assert all(0.0 <= v <= 1.0 for v in merge + cross)
    # the two-step game has a handful of states: nearly every write meets an entry, and lookups hit merged ones
    assert merge[-1] > 0.5 and cross[-1] > 0.5, (merge[-1], cross[-1])


def test_emu_logs_its_incentive_apart_from_its_curiosity(runs):
    rows = _names(runs["emu-qmix"])
    assert {"reward_incentive", "reward_curiosity", "reward_intrinsic", "memory_desirable_hit_share"} <= set(rows)
    for incentive, curiosity, total in zip(rows["reward_incentive"], rows["reward_curiosity"], rows["reward_intrinsic"]):
        assert incentive + curiosity == pytest.approx(total, rel=1e-5, abs=1e-9)
    assert "reward_curiosity" in _names(runs["emc-qmix"]) and "reward_incentive" not in _names(runs["emc-qmix"])


def test_memory_use_flags_a_memory_of_self_hits_only(runs, tmp_path):
    uses = {u.algo: u for u in memory_use(load_runs(runs["sem-qmix"].parent))}
    assert not uses["sem-qmix"].self_hits_only  # two-step states repeat
    assert "qmix" not in uses  # no memory, no figures
    assert set(uses["mc-qmix"].figures) == {"memory_hit_rate"}  # no table: nothing merges
    # a run whose table never merged: rows as SMAX's random starts give
    fake = runs["sem-qmix"].parent.parent / "fake" / runs["sem-qmix"].name
    fake.mkdir(parents=True)
    for name in ("config.json", "final.json"):
        (fake / name).write_text((runs["sem-qmix"] / name).read_text())
    lines = (runs["sem-qmix"] / "metrics.csv").read_text().splitlines()
    header, body = lines[0], lines[1:]
    body = [ln.rsplit(",", 1)[0] + ",0.001" if ",memory_cross_hit_rate," in ln else ln for ln in body]
    (fake / "metrics.csv").write_text("\n".join([header, *body]) + "\n")
    (use,) = memory_use(load_runs(fake.parent))
    assert use.figures["memory_cross_hit_rate"][2] < SELF_HIT_LIMIT and use.self_hits_only


def test_report_shows_what_the_memories_did(runs, tmp_path):
    pytest.importorskip("rliable")
    result = CliRunner().invoke(app, ["report", str(runs["sem-qmix"].parent), "--at", "200,400", "--reps", "20",
                                      "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## What the memories did" in text
    table = text.split("## What the memories did")[1]
    assert "| matrix:two_step | sem-qmix |" in table and "| matrix:two_step | emu-qmix |" in table
    assert "| codes in use | code perplexity | extrinsic reward, mean |" in table
    assert "**Codebooks:** lagma-qmix on matrix:two_step had " in table


def test_a_codebook_memory_is_read_as_one_not_as_a_table_of_returns(runs):
    uses = {u.algo: u for u in memory_use(load_runs(runs["sem-qmix"].parent))}
    lagma, sem = uses["lagma-qmix"], uses["sem-qmix"]
    assert lagma.codebook and not sem.codebook
    assert {"lagma_codes_used", "lagma_perplexity", "lagma_reward_extrinsic", "reward_incentive"} <= set(lagma.figures)
    codes = lagma.figures["lagma_codes_used"][0]
    assert 1 <= codes <= LAGMASettings().lagma_n_codes and 1.0 <= lagma.figures["lagma_perplexity"][0] <= codes + 1e-6
    # however few of its lookups meet a code of more than one episode, its incentive is no return target
    forced = MemoryUse(env=lagma.env, algo=lagma.algo, runs=1,
                       figures={**lagma.figures, "memory_cross_hit_rate": (0.0, 0.0, 0.0)})
    assert not forced.self_hits_only
    assert MemoryUse(env=sem.env, algo=sem.algo, runs=1,
                     figures={**sem.figures, "memory_cross_hit_rate": (0.0, 0.0, 0.0)}).self_hits_only


smax = pytest.mark.smax


@smax
def test_fixed_starts_give_the_same_first_state_whatever_the_seed():
    pytest.importorskip("jaxmarl")
    from semzoo.envs.smax import SMAXVecEnv, parallel_env

    fixed = SMAXVecEnv("2s3z", 3, fixed_starts=True)
    a, b = fixed.reset(seed=0).state, fixed.reset(seed=1234).state
    assert np.array_equal(a, b) and np.array_equal(a[0], a[2])
    noisy = SMAXVecEnv("2s3z", 3)
    c, d = noisy.reset(seed=0).state, noisy.reset(seed=1234).state
    assert not np.array_equal(c[0], d[0]) and not np.array_equal(c[0], c[1])  # SMAX's own starts never repeat
    env1, env2 = parallel_env("2s3z", seed=1, fixed_starts=True), parallel_env("2s3z", seed=2, fixed_starts=True)
    env1.reset(), env2.reset()
    assert np.array_equal(env1.state(), env2.state()) and np.array_equal(env1.state(), a[0])


@smax
def test_fixed_starts_is_a_run_env_arg_with_a_one_line_error():
    pytest.importorskip("jaxmarl")
    result = CliRunner().invoke(app, ["train", "--env", "smax:3m", "--env-arg", "fixed_starts=yes", "--steps", "10"])
    assert result.exit_code != 0
    assert "fixed_starts='yes'" in result.output and "Traceback" not in result.output


@smax
def test_sem_merges_far_more_on_fixed_starts(tmp_path):
    pytest.importorskip("jaxmarl")
    rates = {}
    for fixed in (False, True):
        config = TrainConfig(env="smax:3m", env_args={"fixed_starts": fixed}, algo="sem-qmix", steps=1200, seed=0,
                             n_envs=4, test_interval=1200, test_episodes=2, log_interval=600, save_interval=0,
                             sequential=True, out=str(tmp_path), run_name=f"fixed-{fixed}",
                             memory=MemoryConfig(pending_size=200),
                             learner=LearnerConfig(batch_size=4, buffer_size=32))
        run_dir, _ = train(config, progress=False, tensorboard=False)
        rates[fixed] = _names(Path(run_dir))["memory_merge_rate"][-1]
    assert rates[False] < 0.01  # SMAX's own starts: a state is (almost) never seen twice
    assert rates[True] > 5 * max(rates[False], 1e-3), rates
