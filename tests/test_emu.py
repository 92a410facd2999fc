"""EMU (Na et al., ICLR 2024) as the registered memory "emu": the embedder, the memory's write rules (desirability,
memory shift, max rule), the box lookup, the episodic incentive, and runs of emu-<mixer> through the CLI, in a
--seeds group and resumed exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import NO_ACTOR_FLAGS
from test_checkpoint import assert_cli_resume_is_exact, assert_same
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import MemoryConfig, TrainConfig
from semzoo.episodic.emu import VISIT_EPSILON, EMUMemory
from semzoo.episodic.memory import memory_class
from semzoo.episodic.setup import MemorySetup
from semzoo.runfiles import read_metrics
from semzoo.types import CleanBatch, EpisodeBatch

GAMMA = 0.9
S = 3
"""State size of the constructed batches."""


def emu(**kw) -> EMUMemory:
    """A small EMU memory without curiosity (the incentive alone is the intrinsic reward)."""
    settings = {"state_dim": S, "capacity": 256, "gamma": GAMMA, "train_samples": 64, "train_batch": 16,
                "hidden_dim": 16, **kw}
    return EMUMemory(**settings)


def episodes(states, rewards, terminated=True) -> EpisodeBatch:
    """Episodes of equal length T from states [B, T+1, S] and rewards [B, T]; the last step a real end or not."""
    state = torch.as_tensor(np.asarray(states, np.float32))
    reward = torch.as_tensor(np.asarray(rewards, np.float32))
    b, t = reward.shape
    term = torch.zeros(b, t, dtype=torch.bool)
    term[:, -1] = terminated
    return EpisodeBatch(obs=torch.zeros(b, t + 1, 1, 1), state=state, avail=torch.ones(b, t + 1, 1, 2, dtype=torch.bool),
                        actions=torch.zeros(b, t, 1, dtype=torch.int64), reward=reward, terminated=term,
                        filled=torch.ones(b, t, dtype=torch.bool), length=torch.full((b,), t))


def store(memory: EMUMemory, batch: EpisodeBatch, won=None) -> None:
    memory.on_wins(None if won is None else np.asarray(won, bool))
    memory.on_store(batch, None)


def slot_of(memory: EMUMemory, state, t: int) -> int:
    """The slot of the entry a state at step t reaches (it must hit)."""
    found = memory.index.query(memory.embed(np.asarray([state], np.float32), np.asarray([t])))
    assert found.hit[0], "the state has no entry"
    return int(found.slot[0])


def random_states(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, S)).astype(np.float32)


# ----- the embedder ------------------------------------------------------------------------------------------

def test_embedder_loss_goes_down_on_a_fixed_set_of_states():
    memory = emu(lr=1e-2)  # a fast learner, so that the test takes a few dozen steps
    states = random_states(40, seed=0).reshape(20, 2, S)
    store(memory, episodes(np.concatenate([states, states[:, :1]], axis=1), np.arange(40).reshape(20, 2) / 10.0))
    losses = []
    for _ in range(15):
        memory.train_embedder()
        losses.append(memory.last_loss)
    assert memory.trainings == 15
    assert losses[-1] < 0.5 * losses[0], losses


def test_retraining_re_embeds_every_stored_key_and_stored_states_still_hit():
    memory = emu()
    states = random_states(30, seed=1).reshape(10, 3, S)
    batch = episodes(states, np.ones((10, 2)))  # slots 0 and 1 are steps; slot 2 is the state after a real end
    store(memory, batch)
    slots = memory.index.slots()
    before = memory.index.keys(slots).copy()
    memory.train_embedder()
    after = memory.index.keys(slots)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, memory.embed(memory.state_NS[slots], memory.time_N[slots]), rtol=0, atol=1e-6)
    lookup = memory.lookup_batch(CleanBatch.from_batch(batch), None)
    # s_{t+1} of the first step of each episode is a stored state; after the last (a real end) nothing is looked up
    assert lookup.hit_BT[:, 0].all() and not lookup.hit_BT[:, 1].any()


# ----- the write rules -----------------------------------------------------------------------------------------

def one_step(state, reward: float) -> EpisodeBatch:
    return episodes([[state, state]], [[reward]])


def test_the_stored_return_is_the_max_until_a_desirable_visit_shifts_the_entry():
    memory = emu(delta=0.5)  # a wide box: a nearby state reaches the same entry
    x = np.array([1.0, 2.0, 3.0], np.float32)
    store(memory, one_step(x, 3.0), won=[False])
    slot = slot_of(memory, x, 0)
    store(memory, one_step(x, 5.0), won=[False])
    store(memory, one_step(x, 2.0), won=[False])
    assert memory.return_N[slot] == 5.0 and not memory.desirable_N[slot]  # max rule
    near = x + 1e-3
    store(memory, one_step(near, 1.0), won=[True])  # lower return, but desirable: the entry moves there
    assert slot_of(memory, near, 0) == slot
    assert memory.return_N[slot] == 1.0 and memory.desirable_N[slot]
    np.testing.assert_array_equal(memory.state_NS[slot], near)
    np.testing.assert_array_equal(memory.index.keys([slot])[0], memory.embed(near[None], np.array([0]))[0])
    store(memory, one_step(x, 0.5), won=[True])
    store(memory, one_step(x, 4.0), won=[False])
    assert memory.return_N[slot] == 4.0 and memory.desirable_N[slot]  # desirable now: the max rule again
    np.testing.assert_array_equal(memory.state_NS[slot], near)  # no shift of a desirable entry
    assert (memory.visits_N[slot], memory.desirable_visits_N[slot]) == (6, 2)


@pytest.mark.parametrize("together", [False, True], ids=["two batches", "one batch"])
def test_desirability_propagates_back_from_a_desirable_entry(together):
    a, b, c = random_states(3, seed=2)
    won = episodes([[a, b, b]], [[0.0, 1.0]])
    lost = episodes([[c, b, b]], [[0.0, 0.0]])
    memory = emu()
    if together:
        store(memory, episodes([[a, b, b], [c, b, b]], [[0.0, 1.0], [0.0, 0.0]]), won=[True, False])
    else:
        store(memory, won, won=[True])
        store(memory, lost, won=[False])
    sa, sb, sc = slot_of(memory, a, 0), slot_of(memory, b, 1), slot_of(memory, c, 0)
    assert memory.desirable_N[[sa, sb, sc]].all()  # c precedes a desirable entry in its episode
    # b: added by the won episode (N 1, N_d 0), then visited by the lost one, whose flag at b is its own (lost)
    assert (memory.visits_N[sb], memory.desirable_visits_N[sb]) == (2, 0)
    assert memory.return_N[sb] == 1.0 and memory.return_N[sc] == pytest.approx(0.0)


def test_every_episode_of_a_batch_is_written():
    memory = emu()
    states = random_states(12, seed=3).reshape(4, 3, S)
    store(memory, episodes(states, np.zeros((4, 2))))
    assert memory.index.n_entries == 8  # 4 episodes x 2 steps


# ----- the lookup ------------------------------------------------------------------------------------------

def test_box_lookup_hits_and_misses_as_a_brute_force_z_box():
    memory = emu(delta=0.05)
    stored = random_states(60, seed=4)
    before = random_states(60, seed=40)
    # stored at step 1, where the lookup of a one-step batch reads s_{t+1}
    store(memory, episodes(np.stack([before, stored, stored], axis=1), np.c_[np.zeros(60), np.arange(60) / 7.0]))
    memory.index.fit_normalisation()
    rng = np.random.default_rng(5)
    queries = stored[rng.integers(0, 60, 200)] + rng.normal(size=(200, S)).astype(np.float32) * rng.choice(
        [0.0, 1e-3, 1e-2, 1e-1], size=(200, 1)).astype(np.float32)
    batch = episodes(np.stack([queries, queries], axis=1), np.zeros((200, 1)), terminated=False)
    lookup = memory.lookup_batch(CleanBatch.from_batch(batch), None)
    # brute force: every stored key against every query key in z-normalised space
    slots = memory.index.slots()
    mean, std = memory.index.tolerance.mean_D, memory.index.tolerance.std_D
    z_keys = (memory.index.keys(slots).astype(np.float64) - mean) / std
    z_queries = (memory.embed(queries, np.ones(200, np.int64)).astype(np.float64) - mean) / std
    inside = (np.abs(z_queries[:, None] - z_keys[None]) <= 0.05).all(axis=2)
    distance = np.where(inside, np.linalg.norm(z_queries[:, None] - z_keys[None], axis=2), np.inf)
    hit = inside.any(axis=1)
    assert 10 < hit.sum() < 190  # both hits and misses
    np.testing.assert_array_equal(lookup.hit_BT[:, 0].numpy(), hit)
    expected = np.where(hit, memory.return_N[slots[distance.argmin(axis=1)]], 0.0)
    np.testing.assert_allclose(lookup.return_BT[:, 0].numpy(), expected, rtol=1e-6)


# ----- the incentive ---------------------------------------------------------------------------------------

def test_the_incentive_is_paid_for_desirable_entries_above_v_only():
    a, b, c, x, d, e, f, y, m1, m2 = random_states(10, seed=6)
    batch = episodes([[a, b, c, x], [d, e, f, y]], [[0.0, 0.0, 10.0], [0.0, 0.0, 10.0]])  # won, lost: equal returns
    memory = emu()
    for _ in range(2):  # added (N 1, N_d 0), then visited (N 2, N_d 1 on the won episode)
        store(memory, batch, won=[True, False])
    misses = episodes([[m1, m2, m2, m2]], [[0.0, 0.0, 0.0]], terminated=False)
    both = EpisodeBatch(**{name: torch.cat([getattr(batch, name), getattr(misses, name)])
                           for name in batch.tensors()})
    clean = CleanBatch.from_batch(both)
    lookup = memory.lookup_batch(clean, None)
    next_value = torch.tensor([[4.0, 12.0, 0.0], [4.0, 4.0, 0.0], [-5.0, -5.0, -5.0]])
    reward = memory.intrinsic_reward(lookup, clean, next_value)
    expected = torch.zeros(3, 3)
    # s_1 = b: H = gamma * 10 = 9 > V = 4, N_d / (N + 0.001) = 1 / 2.001; s_2 = c: H = 10 < V = 12; after x: a real end
    expected[0, 0] = GAMMA * (1 / (2 + VISIT_EPSILON)) * (GAMMA * 10.0 - 4.0)
    torch.testing.assert_close(reward, expected)
    # e and f are hits, never desirable: no incentive; m2 misses (and H - V > 0 there); nothing after a real end
    assert lookup.hit_BT[:2, :2].all() and not lookup.hit_BT[:2, 2].any() and not lookup.hit_BT[2].any()
    assert lookup.desirability_BT[0, 0] > 0 and lookup.desirability_BT[1, 0] == 0
    off = emu(incentive=False)
    assert off.intrinsic_reward(lookup, clean, next_value) is None  # no curiosity, no incentive


# ----- building, state, plan ------------------------------------------------------------------------------

def test_emu_is_registered_and_building_it_leaves_the_global_torch_stream_alone():
    assert memory_class("emu") is EMUMemory
    before = torch.get_rng_state()
    config = TrainConfig(env="matrix:two_step", algo="emu-qmix", device="cpu", memory=MemoryConfig(capacity=64))
    memory = EMUMemory.from_config(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=4))
    assert torch.equal(before, torch.get_rng_state())
    assert memory.curiosity is not None and memory.state_key_words == 0
    assert EMUMemory.planned_state_key_words(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=1)) == 0
    again = EMUMemory.from_config(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=4))
    assert_same(memory.embedder.state_dict(), again.embedder.state_dict())


def test_a_full_memory_holds_no_more_than_planned():
    config = TrainConfig(env="matrix:two_step", algo="emu-qmix", device="cpu", memory=MemoryConfig(capacity=40))
    memory = EMUMemory.from_config(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=4))
    states = random_states(60, seed=7).reshape(20, 3, S)
    store(memory, episodes(states, np.ones((20, 2))))
    memory.train_embedder()
    assert memory.index.n_entries == 40  # full: least recently used entries were evicted
    assert 0 < memory.nbytes <= EMUMemory.planned_nbytes(MemorySetup.of(config, state_dim=S, n_agents=2, n_actions=3, obs_dim=4))


def test_state_dict_restores_a_memory_that_then_answers_and_trains_alike():
    memory = emu()
    states = random_states(30, seed=8).reshape(10, 3, S)
    batch = episodes(states, np.ones((10, 2)))
    store(memory, batch, won=[True] * 5 + [False] * 5)
    memory.train_embedder()
    copy = emu()
    copy.load_state_dict(memory.state_dict())
    for m in (memory, copy):
        store(m, batch, won=[False] * 10)
        m.train_embedder()
    assert_same(memory.state_dict(), copy.state_dict())


@pytest.mark.parametrize(("kwargs", "needle"), [({"state_dim": 0}, r"^state_dim=0: expected a positive int"),
                                                ({"train_batch": 1.5}, r"^emu_train_batch=1.5: expected a positive int")])
def test_bad_settings_are_one_line_errors(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        emu(**kwargs)


# ----- runs through the CLI ------------------------------------------------------------------------------------

FLAGS = ["--env", "matrix:two_step", "--n-envs", "8", "--device", "cpu", "--log-interval", "64",
         "--test-interval", "96", "--test-episodes", "8", "--batch-size", "16", "--buffer-size", "64",
         "--target-update-episodes", "20", "--memory-capacity", "500", "--emu-train-interval", "96",
         "--emu-train-samples", "64", "--emu-train-batch", "16", "--emu-norm-interval", "32", "--no-tensorboard"]
"""matrix:two_step, 16 env steps per iteration: the embedder retrains every 96 env steps."""


def semzoo_train(*args: str) -> None:
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 0, result.output


def last_row(run_dir) -> dict[str, float]:
    rows = read_metrics(run_dir)
    end = max(r["env_steps"] for r in rows)
    return {r["name"]: r["value"] for r in rows if r["env_steps"] == end}


@pytest.mark.parametrize("algo", ["emu-qmix", "emu-vdn"])
def test_emu_trains_from_the_cli(tmp_path, algo):
    semzoo_train(*FLAGS, *NO_ACTOR_FLAGS, "--algo", algo, "--steps", "200", "--out", str(tmp_path), "--run-name", "r")
    last = last_row(tmp_path / "r")
    assert last["emu_trainings"] == 2 and last["memory_entries"] == 3  # two_step: state 1, then 2A or 2B
    assert last["memory_hit_rate"] == 1.0 and math.isfinite(last["emu_embedder_loss"])
    assert last["reward_intrinsic"] > 0 and "curiosity_scale" in last


def test_emu_trains_in_a_seeds_group(tmp_path):
    semzoo_train(*FLAGS, "--algo", "emu-qmix", "--steps", "200", "--out", str(tmp_path), "--seeds", "0-1")
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(runs) == 2
    for run_dir in runs:
        assert last_row(run_dir)["emu_trainings"] == 2


def test_an_emu_run_resumes_exactly(tmp_path):
    def trained_twice(state):  # the embedder trained at 96 and 192, the run stopped at 208
        assert state["memory"]["trainings"] == 2

    flags = [*FLAGS, *NO_ACTOR_FLAGS, "--algo", "emu-qmix", "--save-interval", "64"]
    a = assert_cli_resume_is_exact(semzoo_train, tmp_path, flags, steps=400, stop_at=208, logs=("emu_embedder_loss",),
                                   stopped=trained_twice)
    assert a["memory"]["trainings"] == 4  # and at 288 and 384, after the resume
