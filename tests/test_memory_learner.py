"""The episodic-memory target inside the learner (paper eq. 4, 6, 7): hits, misses, ends, lambda, SAEM."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import NO_ACTOR

from semzoo.agents.rnn import RNNAgent
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.episodic.memory import episodic_target
from semzoo.episodic.sem import EpisodicMemory, make_episodic_memory
from semzoo.episodic.target import EpisodicTarget
from semzoo.learners.q_learner import QLearner
from semzoo.mixers.base import make_mixer
from semzoo.mixers.settings import QMIXSettings
from semzoo.types import CleanBatch, EpisodeBatch

A, O, S, U, T = 2, 3, 4, 3, 5
GAMMA = 0.9
TABLE_VALUE = 100.0
"""Far from any y a small random network produces, so E != y wherever the table answers."""


def make_memory(kind: str = "sem") -> EpisodicMemory:
    return make_episodic_memory(kind, state_dim=S, n_agents=A, capacity=1000, pending_size=10_000, gamma=GAMMA)


def make_learner(memory: EpisodicMemory | None = None, *, lam: float = 0.1, miss_rule: str = "target",
                 mixer: str = "qmix") -> QLearner:
    """Same seed, same networks whatever the memory: learners differ only in their episodic part."""
    torch.manual_seed(0)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    mix = make_mixer(mixer, n_agents=A, state_dim=S, n_actions=U, settings=QMIXSettings(embed_dim=4, hypernet_dim=8) if mixer == "qmix" else None)
    learner = QLearner(agent=agent, mixer=mix, config=LearnerConfig(gamma=GAMMA),
                       memory_config=MemoryConfig(lam=lam, miss_rule=miss_rule),  # type: ignore[arg-type]
                       memory=memory)
    with torch.no_grad():  # a target network unlike the online one, so y is not trivially Q_tot
        for p in learner.target_agent.parameters():
            p.add_(0.1)
    return learner


def make_batch(lengths=(5, 3, 2), terminated_last=(True, False, False), pad_value: float = 0.0,
               seed: int = 1) -> EpisodeBatch:
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    length = torch.tensor(lengths)
    filled = torch.arange(T)[None] < length[:, None]
    slot = torch.arange(T + 1)[None] <= length[:, None]
    terminated = torch.zeros(b, T, dtype=torch.bool)
    for i, (n, term) in enumerate(zip(lengths, terminated_last)):
        terminated[i, n - 1] = term
    return EpisodeBatch(
        obs=torch.where(slot[..., None, None], torch.randn(b, T + 1, A, O, generator=g), pad_value),
        state=torch.where(slot[..., None], torch.randn(b, T + 1, S, generator=g), pad_value),
        avail=torch.ones(b, T + 1, A, U, dtype=torch.bool),
        actions=torch.randint(0, U, (b, T, A), generator=g),
        reward=torch.where(filled, torch.randn(b, T, generator=g), pad_value),
        terminated=terminated, filled=filled, length=length,
    )


def episodic(learner: QLearner, batch: EpisodeBatch) -> tuple[torch.Tensor, EpisodicTarget]:
    """(y [B,T], the episodic target) of a batch, through the learner's own pieces and its memory."""
    clean = CleanBatch.from_batch(batch)
    assert learner.memory is not None
    with torch.no_grad():
        q = learner.agent_q(learner.agent, clean)
        next_value = learner.next_value(clean, q)
        y = learner.td_target(clean, next_value)
    target = episodic_target(learner.memory, clean, y, next_value, gamma=learner.config.gamma,
                             miss_rule=learner.memory_config.miss_rule)
    return y, target


def targets(learner: QLearner, batch: EpisodeBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, E, mask of the memory term), each [B,T]."""
    y, target = episodic(learner, batch)
    return y, target.e_BT, target.applies_BT


def q_tot_of(learner: QLearner, batch: EpisodeBatch) -> torch.Tensor:
    """Q_tot(tau_t, u_t) of the online networks, [B,T]."""
    clean = CleanBatch.from_batch(batch)
    q = learner.agent_q(learner.agent, clean)
    chosen = q[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)
    return learner.mixer(chosen, clean.state[:, :-1]).squeeze(-1)


def loss_and_grads(learner: QLearner, batch: EpisodeBatch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    loss, _ = learner.compute_loss(batch)
    learner.optimizer.zero_grad()
    loss.backward()
    return loss.detach().clone(), [p.grad.clone() for p in learner.params]


def store_next_states(memory: EpisodicMemory, batch: EpisodeBatch, where_BT: torch.Tensor,
                      values_BT: torch.Tensor | None = None) -> None:
    """Write Q^S(s_{t+1}) for the steps in ``where`` (value TABLE_VALUE + t unless given)."""
    if values_BT is None:
        values_BT = TABLE_VALUE + torch.arange(T, dtype=torch.float32).expand(batch.batch_size, T)
    memory.add(memory.keys(batch.state[:, 1:][where_BT]), values_BT[where_BT])


# ----------------------------------------------------------------------------------------------- SEM


def test_sem_target_on_a_hit_is_reward_plus_discounted_table_value():
    batch = make_batch(terminated_last=(False, False, False))
    memory = make_memory()
    store_next_states(memory, batch, batch.filled)
    learner = make_learner(memory)
    y, e, applies = targets(learner, batch)
    real = batch.filled
    expected = batch.reward + torch.tensor(GAMMA) * (TABLE_VALUE + torch.arange(T, dtype=torch.float32))
    assert torch.allclose(e[real], expected[real], rtol=0, atol=1e-5)
    assert (e[real] - y[real]).abs().min() > 1.0  # the table, not the target network, set E
    assert torch.equal(applies.bool(), real)


def test_sem_target_on_a_miss_is_the_td_target():
    batch = make_batch(terminated_last=(False, False, False))
    learner = make_learner(make_memory())  # empty table: every lookup misses
    y, e, applies = targets(learner, batch)
    real = batch.filled
    assert torch.equal(e[real], y[real])
    assert torch.equal(applies.bool(), real)  # the paper's rule keeps the memory term on a miss


def test_sem_mixes_hits_and_misses_step_by_step():
    batch = make_batch(terminated_last=(False, False, False))
    hit = batch.filled & (torch.arange(T)[None] % 2 == 0)
    memory = make_memory()
    store_next_states(memory, batch, hit)
    y, target = episodic(make_learner(memory), batch)
    e = target.e_BT
    miss = batch.filled & ~hit
    assert torch.equal(e[miss], y[miss])
    assert (e[hit] - y[hit]).abs().min() > 1.0
    assert torch.equal(target.answered_BT.bool(), hit)
    assert target.hit_rate == pytest.approx(hit.sum().item() / batch.filled.sum().item())  # every real step queried


def test_sem_target_after_a_real_end_is_the_reward_alone():
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(True, True, False))
    memory = make_memory()
    store_next_states(memory, batch, batch.filled)  # even the slot after the end is in the table
    y, e, _ = targets(make_learner(memory), batch)
    end = batch.terminated
    assert torch.equal(e[end], batch.reward[end])
    assert torch.equal(y[end], batch.reward[end])
    truncated_end = torch.zeros_like(end)
    truncated_end[2, 1] = True  # episode 2 hit the time limit: it bootstraps from the table
    assert torch.allclose(e[truncated_end], batch.reward[truncated_end] + GAMMA * (TABLE_VALUE + 1), atol=1e-5)


def test_miss_rule_zero_drops_missed_steps_from_the_memory_term():
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(True, False, False))
    hit = batch.filled & ~batch.terminated & (torch.arange(T)[None] < 2)
    memory = make_memory()
    store_next_states(memory, batch, hit)
    learner = make_learner(memory, lam=1.0, miss_rule="zero")
    _, target = episodic(learner, batch)
    e = target.e_BT
    answered = hit | batch.terminated  # after a real end E = r needs no table
    assert torch.equal(target.applies_BT.bool(), answered)
    assert torch.equal(target.answered_BT.bool(), answered)
    queried = batch.filled & ~batch.terminated  # a real end reads no table, so it is no query
    assert target.hit_rate == pytest.approx(hit.sum().item() / queried.sum().item())

    loss, _ = learner.compute_loss(batch)
    with torch.no_grad():
        q_tot = q_tot_of(learner, batch)
    # sum over answered steps / number of real steps: a miss adds nothing and up-weights nothing
    expected = ((q_tot - e) ** 2)[answered].sum() / batch.filled.sum()
    assert torch.allclose(loss, expected, rtol=1e-6)


def test_miss_rule_zero_with_an_empty_table_gives_no_memory_loss_or_gradient():
    batch = make_batch(terminated_last=(False, False, False))
    learner = make_learner(make_memory(), lam=1.0, miss_rule="zero")
    loss, grads = loss_and_grads(learner, batch)
    assert loss.item() == 0.0
    assert all((g == 0).all() for g in grads)


# ----------------------------------------------------------------------------------------------- lambda


@pytest.mark.parametrize("kind", ["sem", "saem"])
@pytest.mark.parametrize("mixer", ["vdn", "qmix"])
def test_lambda_zero_is_the_plain_method_bit_for_bit(kind, mixer):
    batch = make_batch()
    memory = make_memory(kind)
    if kind == "sem":
        store_next_states(memory, batch, batch.filled)
    else:
        memory.add(memory.keys(batch.state[:, :-1][batch.filled], batch.actions[batch.filled]),
                   torch.full((int(batch.filled.sum()),), TABLE_VALUE))
    with_memory = make_learner(memory, lam=0.0, mixer=mixer)
    plain = make_learner(None, mixer=mixer)
    loss_m, grads_m = loss_and_grads(with_memory, batch)
    loss_p, grads_p = loss_and_grads(plain, batch)
    assert torch.equal(loss_m, loss_p)
    assert all(torch.equal(gm, gp) for gm, gp in zip(grads_m, grads_p))
    with_memory.train(batch)
    plain.train(batch)
    assert all(torch.equal(pm, pp) for pm, pp in zip(with_memory.params, plain.params))
    assert with_memory.compute_loss(batch)[1]["loss_em"] > 0  # the memory was read, just not used


def test_lambda_one_uses_the_episodic_target_alone():
    batch = make_batch()
    memory = make_memory()
    store_next_states(memory, batch, batch.filled)
    learner = make_learner(memory, lam=1.0)
    _, e, _ = targets(learner, batch)
    loss, stats = learner.compute_loss(batch)
    with torch.no_grad():
        q_tot = q_tot_of(learner, batch)
    real = batch.filled
    assert torch.allclose(loss, ((q_tot - e) ** 2)[real].mean(), rtol=1e-6)
    assert abs(loss.item() - stats["loss_td"]) > 1.0
    # every step is answered by the table (or ends), so the target network no longer matters
    with torch.no_grad():
        for p in learner.target_mixer.parameters():
            p.mul_(3.0)
    assert torch.equal(learner.compute_loss(batch)[0], loss)


def test_loss_blends_td_and_memory_terms_with_lambda():
    batch = make_batch()
    memory = make_memory()
    store_next_states(memory, batch, batch.filled & (torch.arange(T)[None] < 2))
    learner = make_learner(memory, lam=0.3)
    loss, stats = learner.compute_loss(batch)
    assert loss.item() == pytest.approx(0.7 * stats["loss_td"] + 0.3 * stats["loss_em"], rel=1e-6)


# ----------------------------------------------------------------------------------------------- SAEM


def test_saem_tells_two_joint_actions_in_the_same_state_apart():
    batch = make_batch(lengths=(2, 2), terminated_last=(True, True))
    batch.state[1] = batch.state[0]  # the same states ...
    batch.actions[0, 0] = torch.tensor([0, 1])
    batch.actions[1, 0] = torch.tensor([1, 0])  # ... different joint actions at t = 0
    memory = make_memory("saem")
    memory.add(memory.keys(batch.state[:, 0], batch.actions[:, 0]), torch.tensor([5.0, -3.0]))
    learner = make_learner(memory, lam=0.5)
    y, e, _ = targets(learner, batch)
    assert e[0, 0].item() == 5.0 and e[1, 0].item() == -3.0  # E = Q^SA(s_t, u_t), no reward added
    assert torch.equal(e[:, 1], y[:, 1])  # (s_1, u_1) is not stored: a miss gives y


# ----------------------------------------------------------------------------------------------- padding


def record_lookups(memory: EpisodicMemory) -> list[np.ndarray]:
    """The keys of every lookup of ``memory`` from now on (a lookup counts as an access for LFU eviction)."""
    looked_up: list[np.ndarray] = []
    table = memory._table  # every probe of the memory, lookup_batch's included, goes through its LFU table
    table_lookup = table.lookup_merged

    def lookup(keys):
        looked_up.append(np.asarray(keys).copy())
        return table_lookup(keys)

    table.lookup_merged = lookup  # type: ignore[method-assign]
    return looked_up


@pytest.mark.parametrize("stored_keys", [False, True], ids=["projected", "stored-keys"])
@pytest.mark.parametrize("kind", ["sem", "saem"])
def test_padding_is_never_queried(kind, stored_keys):
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(True, False, False), pad_value=7.0)
    memory = make_memory(kind)
    if stored_keys:  # as the replay buffer of a run hands them over
        batch = dataclasses.replace(batch, state_keys=torch.from_numpy(memory.slot_state_keys(batch).view(np.int32)))
    recorded = record_lookups(memory)
    learner = make_learner(memory, lam=0.5)
    learner.compute_loss(batch)
    (looked_up,) = recorded
    if kind == "sem":  # s_{t+1} of real, non-terminal steps
        expected = memory.keys(batch.state[:, 1:][batch.filled & ~batch.terminated])
    else:  # s_t of real steps
        expected = memory.keys(batch.state[:, :-1][batch.filled], batch.actions[batch.filled])
    np.testing.assert_array_equal(looked_up, expected)
    padding_key = memory.state_keys(torch.full((S,), 7.0))
    assert not (looked_up[:, : memory.proj_dim] == padding_key).all(axis=1).any()


@pytest.mark.parametrize("kind", ["sem", "saem"])
def test_stored_state_keys_give_the_same_answers_and_accesses_as_projecting(kind):
    batch = make_batch(lengths=(5, 3, 2), terminated_last=(True, False, False), pad_value=7.0)
    projected, stored = make_memory(kind), make_memory(kind)
    for memory in (projected, stored):  # every other step in the table: hits and misses
        memory.update_from(dataclasses.replace(batch, filled=batch.filled & (torch.arange(T) % 2 == 0)))
        memory.flush()
    clean = CleanBatch.from_batch(batch)
    slot_keys = torch.from_numpy(stored.slot_state_keys(batch).view(np.int32))
    a, b = projected.lookup_batch(clean, None), stored.lookup_batch(clean, slot_keys)
    assert 0.0 < float(a.hit_rate) < 1.0
    for name in ("values_BT", "hit_BT", "hit_rate"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    np.testing.assert_array_equal(projected.state_dict()["table_meta"], stored.state_dict()["table_meta"])  # LFU counts


def test_padding_that_matches_a_stored_state_changes_nothing():
    stored = torch.full((S,), 3.0)
    memory = make_memory()
    memory.add(memory.keys(stored[None]), torch.tensor([TABLE_VALUE]))
    learner = make_learner(memory, lam=0.5)
    ref = loss_and_grads(learner, make_batch(pad_value=0.0))
    padded = loss_and_grads(learner, make_batch(pad_value=3.0))  # padding states equal the stored one
    assert torch.equal(ref[0], padded[0])
    assert all(torch.equal(a, b) for a, b in zip(ref[1], padded[1]))


# ----------------------------------------------------------------------------------------------- Trainer


def test_sem_run_logs_the_memory_diagnostics_and_the_three_targets(tmp_path):
    """Enough to draw the paper's figure "comparison among different targets" (y, E, Q_tot over training)."""
    from semzoo.config import ExplorationConfig, TrainConfig
    from semzoo.run.trainer import train
    from semzoo.runfiles import read_metrics

    config = TrainConfig(**NO_ACTOR, env="matrix:two_step", algo="sem-qmix", steps=400, seed=0, n_envs=8, out=str(tmp_path),
                         test_episodes=8, test_interval=10**9, log_interval=100, device="cpu",
                         exploration=ExplorationConfig(epsilon_anneal_steps=200),
                         learner=LearnerConfig(batch_size=8, buffer_size=64),
                         memory=MemoryConfig(lam=0.5, pending_size=32, capacity=1000))
    run_dir, _ = train(config)
    rows = read_metrics(run_dir)
    by_name: dict[str, list[float]] = {}
    for row in rows:
        by_name.setdefault(row["name"], []).append(row["value"])
    for name in ("memory_entries", "memory_bytes", "memory_hit_rate", "target_y", "target_e", "target_e_hit",
                 "q_tot", "loss_td", "loss_em"):
        assert len(by_name.get(name, [])) >= 2, f"{name} logged {len(by_name.get(name, []))} times"
    # the two-step game has 3 non-final states (1, 2A, 2B): all of them are in the table after a few flushes
    assert by_name["memory_entries"][-1] == 3
    assert by_name["memory_bytes"][-1] > 0
    assert by_name["memory_hit_rate"][-1] == 1.0  # every s_{t+1} of a non-final step is 2A or 2B
    assert all(np.isfinite(v) for name in ("target_y", "target_e", "q_tot") for v in by_name[name])


def test_a_memory_run_stores_every_slots_state_keys_and_restores_them_from_a_checkpoint():
    from semzoo.config import TrainConfig
    from semzoo.run.trainer import Trainer

    config = TrainConfig(env="matrix:two_step", algo="saem-qmix", steps=64, seed=0, n_envs=8, device="cpu",
                         test_interval=10**9, log_interval=10**9, learner=LearnerConfig(batch_size=8, buffer_size=64),
                         memory=MemoryConfig(pending_size=16, capacity=1000))
    trainer = Trainer(config)
    trainer.run()
    stored = trainer.buffer.stored()
    assert stored.state_keys is not None and stored.batch_size > 0
    np.testing.assert_array_equal(stored.state_keys.numpy().view(np.uint32), trainer.memory.slot_state_keys(stored))
    resumed = Trainer(config)
    resumed.load_state_dict(trainer.state_dict())  # checkpoints hold no keys: projected again on load
    assert torch.equal(resumed.buffer.data.state_keys, trainer.buffer.data.state_keys)
