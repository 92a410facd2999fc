"""The ablations that separate SEM's table from return mixing: TD(lambda) targets and the own-return memory mc."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.episodic.memory import make_memory
from semzoo.episodic.sem import make_episodic_memory
from semzoo.types import CleanBatch, EpisodeBatch


def _clean(reward_BT, terminated_BT, mask_BT) -> CleanBatch:
    """A CleanBatch whose reward, terminated and mask are given (the fields a target reads); the rest is unused."""
    reward = torch.tensor(reward_BT, dtype=torch.float64)
    n_eps, n_steps = reward.shape
    return CleanBatch(obs=torch.zeros(n_eps, n_steps + 1, 1, 1), state=torch.zeros(n_eps, n_steps + 1, 1),
                      avail=torch.ones(n_eps, n_steps + 1, 1, 1, dtype=torch.bool),
                      actions=torch.zeros(n_eps, n_steps, 1, dtype=torch.int64),
                      last_actions=torch.zeros(n_eps, n_steps + 1, 1, dtype=torch.int64), reward=reward,
                      terminated=torch.tensor(terminated_BT, dtype=torch.float64),
                      mask=torch.tensor(mask_BT, dtype=torch.float64))


# episode 0: three steps, a real end at the last; episode 1: two steps, then a time limit (padding at t = 2)
CLEAN = _clean([[1.0, 2.0, 3.0], [1.0, 1.0, 0.0]], [[0, 0, 1], [0, 0, 0]], [[1, 1, 1], [1, 1, 0]])
# V_{t+1} of every step (the bootstrap value after step t); 99 on padding must never reach a real step
VALUE = torch.tensor([[10.0, 20.0, 30.0], [4.0, 8.0, 99.0]], dtype=torch.float64)


def test_td_lambda_targets_computed_by_hand():
    gamma, lam = 0.5, 0.6
    # episode 0: G2 = r2 (real end); G1 = 2 + 0.5 (0.4 * 20 + 0.6 * 3); G0 = 1 + 0.5 (0.4 * 10 + 0.6 * G1)
    g1 = 2 + 0.5 * (0.4 * 20 + 0.6 * 3)
    g0 = 1 + 0.5 * (0.4 * 10 + 0.6 * g1)
    # episode 1: its last step bootstraps fully from V (a time limit); G0 = 1 + 0.5 (0.4 * 4 + 0.6 G1)
    h1 = 1 + 0.5 * 8
    h0 = 1 + 0.5 * (0.4 * 4 + 0.6 * h1)
    got = CLEAN.lambda_returns(VALUE, gamma, lam) * CLEAN.mask
    want = torch.tensor([[g0, g1, 3.0], [h0, h1, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert got[0, 1].item() == pytest.approx(6.9) and got[0, 0].item() == pytest.approx(5.07)


def test_td_lambda_zero_is_the_one_step_target_and_one_the_monte_carlo_return():
    gamma = 0.5
    torch.testing.assert_close(CLEAN.lambda_returns(VALUE, gamma, 0.0) * CLEAN.mask,
                               CLEAN.bootstrapped(VALUE, gamma) * CLEAN.mask, rtol=0, atol=1e-12)
    mc = CLEAN.lambda_returns(VALUE, gamma, 1.0)
    assert mc[0, 0].item() == pytest.approx(1 + 0.5 * (2 + 0.5 * 3))  # no V at all after a real end
    assert mc[1, 0].item() == pytest.approx(1 + 0.5 * (1 + 0.5 * 8))  # a time limit bootstraps from V once


def test_learner_td_target_blends_lambda_returns_and_adds_the_intrinsic_reward():
    from semzoo.config import LearnerConfig
    from semzoo.learners.q_learner import QLearner

    learner = QLearner.__new__(QLearner)
    learner.config = LearnerConfig(td_lambda=0.6, gamma=0.5)
    intrinsic = torch.full_like(VALUE, 0.25)
    got = learner.td_target(CLEAN, VALUE, intrinsic) * CLEAN.mask
    want = _clean((CLEAN.reward + 0.25 * CLEAN.mask).tolist(), CLEAN.terminated.tolist(),
                  CLEAN.mask.tolist()).lambda_returns(VALUE, 0.5, 0.6) * CLEAN.mask
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_td_lambda_out_of_range_is_one_line_error():
    result = CliRunner().invoke(app, ["train", "--env", "matrix:two_step", "--td-lambda", "1.5", "--steps", "10"])
    assert result.exit_code == 2, result.output
    assert "td_lambda=1.5" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "qplex", "mc-qmix"])
def test_train_with_td_lambda_through_the_cli(algo, tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "matrix:two_step", "--algo", algo, "--td-lambda", "0.6",
                                      "--steps", "160", "--n-envs", "4", "--batch-size", "4", "--pending-size", "40",
                                      "--test-interval", "80", "--test-episodes", "2", "--out", str(tmp_path),
                                      "--sequential"])
    assert result.exit_code == 0, result.output
    run_dir = next(tmp_path.iterdir())
    assert json.loads((run_dir / "config.json").read_text())["learner"]["td_lambda"] == 0.6
    names = {line.split(",")[4] for line in (run_dir / "metrics.csv").read_text().splitlines()[1:]}
    assert "loss_td" in names


def test_algos_lists_the_mc_memory():
    result = CliRunner().invoke(app, ["algos"])
    assert result.exit_code == 0
    assert "mc-" in result.output and "own-return" in result.output


# ----- mc-<base> against sem-<base> where SEM's table never merges two visits --------------------------------

STATE_DIM, N_AGENTS = 5, 2


def _distinct_episodes(seed: int = 0) -> EpisodeBatch:
    """Four episodes of distinct random states (no state repeats): two real ends, one time limit, one padding."""
    rng = np.random.default_rng(seed)
    lengths = [5, 3, 6, 2]
    n_steps = max(lengths)
    filled = np.arange(n_steps)[None, :] < np.asarray(lengths)[:, None]
    terminated = np.zeros_like(filled)
    terminated[0, 4] = terminated[1, 2] = terminated[3, 1] = True  # episode 2 ends at the time limit
    return EpisodeBatch(
        obs=torch.zeros(4, n_steps + 1, N_AGENTS, 2),
        state=torch.as_tensor(rng.standard_normal((4, n_steps + 1, STATE_DIM)).astype(np.float32)),
        avail=torch.ones(4, n_steps + 1, N_AGENTS, 2, dtype=torch.bool),
        actions=torch.zeros(4, n_steps, N_AGENTS, dtype=torch.int64),
        reward=torch.as_tensor(rng.uniform(-1, 2, (4, n_steps)).astype(np.float32)) * torch.as_tensor(filled),
        terminated=torch.as_tensor(terminated), filled=torch.as_tensor(filled),
        length=torch.as_tensor(lengths, dtype=torch.int64))


def test_mc_and_sem_targets_agree_where_the_table_holds_one_visit_per_key():
    batch = _distinct_episodes()
    gamma = 0.97
    sem = make_episodic_memory("sem", state_dim=STATE_DIM, n_agents=N_AGENTS, gamma=gamma, pending_size=1)
    sem.update_from(batch)  # |M| = 1: written at once, one visit per key
    assert sem.n_entries == int(batch.filled.sum())
    config = TrainConfig(env="matrix:two_step", algo="mc-qmix", learner=LearnerConfig(gamma=gamma))
    mc = make_memory("mc", config, state_dim=STATE_DIM, n_agents=N_AGENTS, n_actions=2, obs_dim=2)
    clean = CleanBatch.from_batch(batch)
    next_value = torch.randn(clean.reward.shape, dtype=clean.reward.dtype)
    y = clean.bootstrapped(next_value, gamma)
    answers = {}
    for name, memory in (("sem", sem), ("mc", mc)):
        lookup = memory.lookup_batch(clean, None)
        answers[name] = (lookup, memory.combine_target(lookup, clean, y, next_value, gamma=gamma, miss_rule="target"))
    (sem_lookup, sem_e), (mc_lookup, mc_e) = answers["sem"], answers["mc"]
    assert torch.equal(sem_lookup.hit_BT, mc_lookup.hit_BT)  # the same steps hit: all but a time limit's last
    assert int(sem_lookup.hit_BT.sum()) == 4 + 2 + 6 + 1 - 1  # real non-terminal steps, less the time limit's last
    hit = sem_e.answered_BT > 0
    assert torch.equal(sem_e.e_BT[hit], mc_e.e_BT[hit])  # bit for bit
    assert torch.equal(sem_e.applies_BT, mc_e.applies_BT)
    # a time limit's last step misses in both: E = y there
    assert sem_e.e_BT[2, 5].item() == pytest.approx(y[2, 5].item()) == pytest.approx(mc_e.e_BT[2, 5].item())


def test_mc_e_is_the_episodes_own_discounted_return():
    batch = _distinct_episodes(seed=3)
    clean = CleanBatch.from_batch(batch)
    mc = make_memory("mc", TrainConfig(env="matrix:two_step", algo="mc-qmix", learner=LearnerConfig(gamma=0.9)),
                     state_dim=STATE_DIM, n_agents=N_AGENTS, n_actions=2, obs_dim=2)
    lookup = mc.lookup_batch(clean, None)
    e = mc.combine_target(lookup, clean, clean.reward, torch.zeros_like(clean.reward), gamma=0.9, miss_rule="target")
    r = batch.reward[0].double()
    own = sum(0.9 ** i * r[i].item() for i in range(5))  # episode 0 ends at t = 4: E_0 = R_0
    assert e.e_BT[0, 0].item() == pytest.approx(own, rel=1e-6)
    assert mc.state_dict() == {"gamma": 0.9} and mc.nbytes == 0
