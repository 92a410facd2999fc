"""EMC's episodic memory, registered as "emc" (semzoo.episodic.emc): writes, the episodic loss, and emc-<mixer> runs
trained from the CLI, in a --seeds group and resumed exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import NO_ACTOR_FLAGS
from test_checkpoint import assert_cli_resume_is_exact, assert_same
from test_memory_learner import GAMMA, S, make_batch, make_learner
from typer.testing import CliRunner

from semzoo.algos import algorithm_ids, parse_algorithm
from semzoo.cli import app
from semzoo.config import MemoryConfig, TrainConfig
from semzoo.episodic.curiosity import Curiosity
from semzoo.episodic.emc import EMCMemory
from semzoo.episodic.memory import memory_class
from semzoo.episodic.setup import MemorySetup
from semzoo.runfiles import read_metrics
from semzoo.types import CleanBatch

runner = CliRunner()
WEIGHT = 0.1
"""EMC's emdqn_loss_weight."""


def make_memory(capacity: int = 100, curiosity: Curiosity | None = None) -> EMCMemory:
    return EMCMemory(state_dim=S, capacity=capacity, gamma=GAMMA, seed=0, loss_weight=WEIGHT, curiosity=curiosity)


def key(*z: float) -> np.ndarray:
    return np.array([z], np.float32)


def test_emc_is_a_registered_memory_with_an_id_for_every_mixer():
    assert memory_class("emc") is EMCMemory and EMCMemory.description
    for base in ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix"):
        assert f"emc-{base}" in algorithm_ids() and parse_algorithm(f"emc-{base}").memory == "emc"


# ----- writes ------------------------------------------------------------------------------------------------

def test_a_write_keeps_the_max_of_the_old_and_the_new_return():
    memory = make_memory()
    for ret in (3.0, 1.0, 5.0, 4.0):
        memory.write(key(1, 2, 3, 4), np.array([ret]))
    value, hit = memory.value_of(key(1, 2, 3, 4))
    assert hit.tolist() == [True] and value.tolist() == [5.0] and memory.n_entries == 1


def test_keys_within_the_tolerance_merge_and_others_do_not():
    memory = make_memory()  # EMC: |z - z'| <= 1e-8 + 1e-5 |z| in every dimension
    memory.write(key(1, 2, 3, 4), np.array([1.0]))
    memory.write(key(1 + 5e-6, 2, 3, 4), np.array([2.0]))  # within 1e-5 relative: the same entry
    assert memory.n_entries == 1 and memory.value_of(key(1, 2, 3, 4))[0].tolist() == [2.0]
    memory.write(key(1 + 1e-3, 2, 3, 4), np.array([0.5]))  # outside: a new entry, the first one unchanged
    assert memory.n_entries == 2
    assert memory.value_of(key(1, 2, 3, 4))[0].tolist() == [2.0]
    assert memory.value_of(key(1 + 1e-3, 2, 3, 4))[0].tolist() == [0.5]
    assert memory.value_of(key(1.1, 2, 3, 4))[1].tolist() == [False]


def test_a_full_memory_evicts_the_least_recently_used_entry():
    memory = make_memory(capacity=2)
    a, b, c = key(1, 0, 0, 0), key(2, 0, 0, 0), key(3, 0, 0, 0)
    memory.write(np.concatenate([a, b]), np.array([1.0, 2.0]))
    memory.write(a, np.array([0.0]))  # a is used again: b is now the least recently used
    memory.write(c, np.array([3.0]))
    assert memory.n_entries == 2
    assert memory.value_of(b)[1].tolist() == [False]
    assert memory.value_of(a)[0].tolist() == [1.0] and memory.value_of(c)[0].tolist() == [3.0]


def test_a_lookup_counts_as_a_use_for_eviction():
    batch = make_batch(lengths=(2,), terminated_last=(False,))
    memory = make_memory(capacity=2)
    z1, z2 = memory.keys(batch.state[0, 1:3].numpy())  # s_1 and s_2, read by steps 0 and 1
    memory.write(np.stack([z2, z1]), np.array([1.0, 1.0]))  # z1 written last: z2 is the least recently used
    memory.lookup_batch(CleanBatch.from_batch(batch), None)  # reads z1 then z2: z1 is now the least recently used
    memory.write(key(9, 9, 9, 9), np.array([0.0]))
    assert memory.value_of(z1[None])[1].tolist() == [False] and memory.value_of(z2[None])[1].tolist() == [True]


def test_every_episode_of_a_stored_batch_is_written_with_its_discounted_returns():
    batch = make_batch(lengths=(5, 3, 2))
    memory = make_memory()
    memory.on_store(batch, None)
    assert memory.n_entries == 5 + 3 + 2  # random states: no two keys merge
    for b, length in enumerate((5, 3, 2)):
        reward = batch.reward[b, :length].double().tolist()
        returns = [sum(GAMMA ** (i - t) * reward[i] for i in range(t, length)) for t in range(length)]
        values, hit = memory.value_of(memory.keys(batch.state[b, :length].numpy()))
        assert hit.all()
        np.testing.assert_allclose(values, returns, rtol=1e-5)
    assert memory.value_of(memory.keys(batch.state[1, 3:4].numpy()))[1].tolist() == [False]  # the slot after the end


def test_the_cached_slot_keys_write_what_the_states_do():
    batch = make_batch()
    from_states, from_cache = make_memory(), make_memory()
    from_states.on_store(batch, None)
    from_cache.on_store(batch, from_cache.slot_state_keys(batch))
    assert_same(from_states.state_dict(), from_cache.state_dict(), "memory")


# ----- the episodic loss -------------------------------------------------------------------------------------

def test_the_emc_loss_is_the_weighted_error_at_hits_over_the_real_steps_and_misses_add_nothing():
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(True, False, False))
    memory = make_memory()
    stored = {(0, 2): 5.0, (0, 3): 7.0, (1, 1): -2.0}  # H of these slots' states; every other s_{t+1} misses
    memory.write(memory.keys(np.stack([batch.state[b, t].numpy() for b, t in stored])), np.array(list(stored.values())))
    with_memory, plain = make_learner(memory), make_learner(None)
    loss, stats = with_memory.compute_loss(batch)
    _, plain_stats = plain.compute_loss(batch)

    clean = CleanBatch.from_batch(batch)
    q_tot = with_memory.online_values(clean).q_tot_BT.detach()
    total, n_real = 0.0, 0
    for b, length in enumerate((5, 3, 2)):
        for t in range(length):
            n_real += 1
            r = float(clean.reward[b, t])
            if clean.terminated[b, t]:
                target = r  # a real end: the return from s_{t+1} is 0
            elif (b, t + 1) in stored:
                target = r + GAMMA * stored[b, t + 1]
            else:
                continue  # a miss: no episodic loss
            total += (target - float(q_tot[b, t])) ** 2
    assert stats["loss_emc"] == pytest.approx(WEIGHT * total / n_real, rel=1e-5)
    assert stats["loss_td"] == plain_stats["loss_td"]  # L_td is untouched (no blend, no curiosity here)
    assert loss.item() == pytest.approx(stats["loss_td"] + stats["loss_emc"], rel=1e-6)
    assert "loss_em" not in stats and "reward_intrinsic" not in stats
    assert memory.metrics()["memory_hit_rate"] == pytest.approx(3 / (4 + 3 + 2))  # 3 of 9 non-terminal lookups


def test_with_nothing_stored_only_real_ends_carry_the_emc_loss():
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(False, False, False))
    _, stats = make_learner(make_memory()).compute_loss(batch)
    assert stats["loss_emc"] == 0.0


def test_the_curiosity_reward_joins_the_td_target():
    config = TrainConfig(env="matrix:two_step", algo="emc-qmix")
    curiosity = Curiosity.from_config(MemorySetup.of(config, obs_dim=3, n_agents=2, n_actions=3, state_dim=1))
    batch = make_batch()
    _, stats = make_learner(make_memory(curiosity=curiosity)).compute_loss(batch)
    _, plain = make_learner(make_memory()).compute_loss(batch)
    assert stats["reward_intrinsic"] > 0
    assert stats["target_y"] == pytest.approx(plain["target_y"] + stats["reward_intrinsic"], rel=1e-6)
    assert stats["loss_td"] != plain["loss_td"] and curiosity is not None and curiosity.updates == 1


def test_planned_bytes_bound_a_full_memory():
    config = TrainConfig(env="matrix:two_step", algo="emc-qmix", memory=MemoryConfig(capacity=64))
    memory = EMCMemory.from_config(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=3))
    memory.write(np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32), np.zeros(64))
    assert memory.curiosity is not None
    memory.curiosity.reward(CleanBatch.from_batch(make_batch()))
    planned = EMCMemory.planned_nbytes(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=3))
    assert memory.n_entries == 64 and memory.nbytes <= planned <= memory.nbytes + 300_000  # the recent run's bound
    assert EMCMemory.planned_state_key_words(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=1)) == memory.state_key_words == 4


# ----- through the CLI ---------------------------------------------------------------------------------------

FLAGS = ["--env", "matrix:two_step", "--n-envs", "8", "--device", "cpu", "--log-interval", "64",
         "--test-interval", "96", "--test-episodes", "8", "--save-interval", "64", "--batch-size", "16",
         "--buffer-size", "64", "--target-update-episodes", "20", "--memory-capacity", "1000",
         "--curiosity-decay-steps", "100", "--no-tensorboard", *NO_ACTOR_FLAGS]
"""matrix:two_step, 16 env steps and 8 episodes per iteration; the curiosity decays every 100 env steps."""


def train_cli(*args: str) -> None:
    result = runner.invoke(app, ["train", *args])
    assert result.exit_code == 0, result.output


def last_row(run_dir) -> dict[str, float]:
    rows = read_metrics(run_dir)
    return {r["name"]: r["value"] for r in rows if r["env_steps"] == max(x["env_steps"] for x in rows)}


def test_emc_qmix_trains_from_the_cli_and_logs_its_metrics(tmp_path):
    train_cli(*FLAGS, "--algo", "emc-qmix", "--steps", "300", "--out", str(tmp_path), "--run-name", "on")
    train_cli(*FLAGS, "--algo", "emc-qmix", "--steps", "300", "--out", str(tmp_path), "--run-name", "off",
              "--no-curiosity")
    on, off = last_row(tmp_path / "on"), last_row(tmp_path / "off")
    assert on["memory_entries"] > 0 and 0 <= on["memory_hit_rate"] <= 1 and on["loss_emc"] >= 0
    assert on["reward_intrinsic"] > 0 and on["curiosity_loss_predictor"] > 0
    assert on["curiosity_scale"] == pytest.approx(0.001 * 0.9 ** 3)  # decayed at 100, 200 and 300 env steps
    assert off["memory_entries"] > 0 and "loss_emc" in off
    assert not any(name.startswith("curiosity_") or name == "reward_intrinsic" for name in off)


def test_emc_qmix_trains_in_a_seeds_group(tmp_path):
    train_cli(*FLAGS, "--algo", "emc-qmix", "--steps", "200", "--out", str(tmp_path), "--seeds", "0-1")
    run_dirs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(run_dirs) == 2
    last = [last_row(run_dir) for run_dir in run_dirs]
    for row in last:
        assert row["memory_entries"] > 0 and "loss_emc" in row and row["reward_intrinsic"] > 0
    assert last[0]["curiosity_loss_predictor"] != last[1]["curiosity_loss_predictor"]  # each run its own networks


def test_a_resumed_emc_qmix_run_logs_the_rows_of_a_run_never_stopped(tmp_path):
    a = assert_cli_resume_is_exact(train_cli, tmp_path, [*FLAGS, "--algo", "emc-qmix"], steps=300, stop_at=150,
                                   logs=("loss_emc", "curiosity_scale"))
    assert a["counters"]["env_steps"] >= 300 and a["memory"]["curiosity"]["updates"] == a["counters"]["updates"] > 0


def test_a_memory_built_for_another_state_size_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"states have shape \(2, 7\), expected \[\.\.\., 4\]"):
        make_memory().keys(torch.zeros(2, 7))
