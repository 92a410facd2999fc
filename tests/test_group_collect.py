"""A group of seeds collects in lockstep: one agent forward per step for all its runs, each run's episodes its own.

``GroupRunner`` steps the K runs' envs together and acts with their agents' parameters stacked
(``StackedAgents``); each run draws its exploration from its own generator and seeds its own envs, so it
collects the episodes its single ``EpisodeRunner.run`` collects. Measured on the development machine's CPU (a
2-core AMD EPYC): the same episodes bit for bit, in float32 and float64, on the two-step game (4 envs x 2
agents) and SMAX 3m (4 envs x 3 agents, episodes of different lengths, so runs leave the stack at different
steps). The stacked forward itself is not bit for bit at every size: a 2 x 64 by 64 x 3 matmul (one env of two
agents, three actions) takes another kernel in a batched call and rounds in the last bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal

import pytest
import torch
from golden_runs import metric_rows
from test_multi import SEEDS, config_of, in_float64
from test_stopping import signal_at

from semzoo import resume_seeds, train_seeds
from semzoo.agents.rnn import RNNAgent, StackedAgents
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.group_runner import GroupRunner
from semzoo.run.multi import MultiTrainer
from semzoo.run.stopping import RunStopped
from semzoo.run.trainer import Trainer

BATCH_FIELDS = ("obs", "state", "avail", "actions", "reward", "terminated", "filled", "length")
SIZES = [(2, 1, 2, 3, 3), (4, 8, 5, 80, 11), (3, 4, 27, 300, 36)]
"""(runs K, envs N, agents A, obs O, actions U): one env of two agents (a matmul that rounds otherwise when
batched), SMAX 2s3z's collection, and a map of 27 agents."""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("size", SIZES, ids=[f"K{s[0]}_N{s[1]}_A{s[2]}" for s in SIZES])
def test_stacked_step_is_each_agents_own_step(dtype, size):
    k, n, a, o, u = size
    generator = torch.Generator().manual_seed(sum(size))
    with torch.random.fork_rng(devices=[]):  # the same initial weights at every run of the test
        torch.manual_seed(sum(size))
        agents = [RNNAgent(obs_dim=o, n_agents=a, n_actions=u).to(dtype) for _ in range(k)]
    inputs = agents[0].build_inputs(torch.randn(k * n, 1, a, o, generator=generator, dtype=dtype),
                                    torch.randint(-1, u, (k * n, 1, a), generator=generator))
    inputs = inputs.reshape(k, n, 1, a, -1)
    hidden = torch.randn(k, n, a, 64, generator=generator, dtype=dtype)
    stacked = StackedAgents(agents)
    with torch.no_grad():
        q, new_hidden = stacked(inputs, hidden)
        rtol, atol = (1e-6, 1e-7) if dtype == torch.float32 else (1e-13, 1e-15)  # the last bits of Q values near 1
        for i, agent in enumerate(agents):
            own_q, own_hidden = agent(inputs[i], hidden[i])
            torch.testing.assert_close(q[i], own_q, rtol=rtol, atol=atol)
            torch.testing.assert_close(new_hidden[i], own_hidden, rtol=rtol, atol=atol)
        # the runs still collecting: a selection computes what the full stack computes for them, bit for bit
        runs = [k - 1, 0]
        q_some, hidden_some = stacked.select(runs)(inputs[runs], hidden[runs])
    assert torch.equal(q_some, q[runs]) and torch.equal(hidden_some, new_hidden[runs])


def test_agents_that_do_not_stack_are_named():
    small, wide = RNNAgent(obs_dim=4, n_agents=2, n_actions=3), RNNAgent(obs_dim=4, n_agents=2, n_actions=3, hidden_dim=8)

    class OwnAgent(RNNAgent):
        pass

    assert StackedAgents.why_not([small, small]) is None
    assert "differ in size" in str(StackedAgents.why_not([small, wide]))
    assert "plain RNNAgents" in str(StackedAgents.why_not([small, OwnAgent(obs_dim=4, n_agents=2, n_actions=3)]))
    with pytest.raises(ValueError, match="differ in size"):
        StackedAgents([small, wide])


def collection_differences(env: str, algo: str, iterations: int, *, through_host: bool = False) -> list[str]:
    """``SEEDS`` collecting as one group (``GroupRunner``) and one by one (``EpisodeRunner.run``), each run then
    learning on its own (``Trainer.learn``): where a run's batch, stats or agent parameters differ.

    ``through_host``: the single runs' agents act on their envs' host arrays (SMAX's ``hand_over_inputs`` off)."""
    together = [Trainer(config_of(env, algo, seed=seed), tensorboard=False) for seed in SEEDS]
    alone = [Trainer(config_of(env, algo, seed=seed), tensorboard=False) for seed in SEEDS]
    if through_host:
        for trainer in alone:
            trainer.runner.env.hand_over_inputs = False  # type: ignore[attr-defined]
    differences, lengths = [], set()
    for iteration in range(iterations):
        plans = [t.next_collection() for t in together]
        collected = GroupRunner([t.runner for t in together]).run(
            epsilons=[epsilon for epsilon, _ in plans], seeds=[seed for _, seed in plans],
            generators=[t.generator for t in together])
        for seed, t, single, (batch, stats) in zip(SEEDS, together, alone, collected):
            epsilon, env_seed = single.next_collection()
            want, want_stats = single.runner.run(epsilon=epsilon, seed=env_seed, generator=single.generator)
            differences += [f"iteration {iteration} seed {seed}: {name}" for name in BATCH_FIELDS
                            if not torch.equal(getattr(batch, name), getattr(want, name))]
            if stats.returns.tolist() != want_stats.returns.tolist():
                differences.append(f"iteration {iteration} seed {seed}: returns")
            lengths.add(int(batch.length.max()))
            for trainer, (b, s) in ((t, (batch, stats)), (single, (want, want_stats))):
                trainer.store(b, s)
                trainer.learn(len(s.returns))
        for seed, t, single in zip(SEEDS, together, alone):
            if not all(torch.equal(p, q) for p, q in zip(t.agent.parameters(), single.agent.parameters())):
                differences.append(f"iteration {iteration} seed {seed}: agent parameters")
    assert together[0].counters.updates > 0, "the runs learned between their collections"
    if env.startswith("smax:"):
        assert len(lengths) > 1, "some run's episodes ended before another's: runs left the stack"
    for trainer in together + alone:
        trainer.close()
    return differences


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_group_collects_the_episodes_of_its_single_runs_bit_for_bit(dtype):
    with in_float64() if dtype == "float64" else contextlib.nullcontext():
        assert collection_differences("matrix:two_step", "qmix", iterations=12) == []


def test_group_collect_check_fails_when_a_run_explores_with_its_neighbours_generator(monkeypatch):
    """A planted change a refactor of the lockstep loop could make: run k draws its exploration from run k+1's generator."""
    group_run = GroupRunner.run

    def rotated(self, *, epsilons, seeds, generators):
        return group_run(self, epsilons=epsilons, seeds=seeds, generators=[*generators[1:], generators[0]])

    monkeypatch.setattr(GroupRunner, "run", rotated)
    assert collection_differences("matrix:two_step", "qmix", iterations=12), "runs exploring with other runs' draws passed"


def count_handed_inputs(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often SMAX envs hand the agents' inputs over (``agent_inputs`` gives tensors) and how often they do not."""
    from semzoo.envs.smax import SMAXVecEnv

    counts, agent_inputs = {"handed": 0, "host": 0}, SMAXVecEnv.agent_inputs

    def counted(self, device):
        got = agent_inputs(self, device)
        counts["host" if got is None else "handed"] += 1
        return got

    monkeypatch.setattr(SMAXVecEnv, "agent_inputs", counted)
    return counts


@pytest.mark.slow
@pytest.mark.smax
def test_a_group_collects_smax_episodes_of_different_lengths_as_its_single_runs(monkeypatch):
    """The runs' SMAX envs reset and step in one call each (``SMAXVecEnv.reset_together``, ``step_together``), runs
    that left the stack included, and the agents act on JAX's buffers handed over; the single runs act on the host
    arrays: the same episodes."""
    pytest.importorskip("jaxmarl")
    from semzoo.envs.smax import SMAXVecEnv

    calls, resets, step_together, reset_together = [], [], SMAXVecEnv.step_together, SMAXVecEnv.reset_together

    def counted(envs, actions):
        calls.append(sum(act is not None for act in actions))
        return step_together(envs, actions)

    def counted_reset(envs, seeds):
        resets.append(len(envs))
        return reset_together(envs, seeds)

    monkeypatch.setattr(SMAXVecEnv, "step_together", staticmethod(counted))
    monkeypatch.setattr(SMAXVecEnv, "reset_together", staticmethod(counted_reset))
    handed = count_handed_inputs(monkeypatch)
    with in_float64():
        assert collection_differences("smax:3m", "qmix", iterations=3, through_host=True) == []
    assert calls and max(calls) == len(SEEDS) and min(calls) < len(SEEDS), "grouped steps, some after a run left"
    assert resets == [len(SEEDS)] * 3, "one grouped reset per collection"
    assert handed["handed"] > 0 and handed["host"] > 0, "the group took JAX's buffers, the single runs the host's"


@pytest.mark.smax
def test_a_smax_run_collects_the_same_episodes_on_inputs_handed_over_as_on_the_host_arrays(monkeypatch):
    """``EpisodeRunner.run`` with SMAX's inputs handed over (``agent_inputs``: JAX's buffers through DLPack) and
    through the host: the same batches and, learning in between, the same parameters, in float64 (converted after
    the hand-over, as the golden runs convert the host arrays)."""
    pytest.importorskip("jaxmarl")
    handed = count_handed_inputs(monkeypatch)
    with in_float64():
        runs = [Trainer(config_of("smax:3m", "qmix", seed=3), tensorboard=False) for _ in range(2)]
        runs[1].runner.env.hand_over_inputs = False  # type: ignore[attr-defined]
        try:
            for iteration in range(3):
                got = []
                for trainer in runs:
                    epsilon, seed = trainer.next_collection()
                    batch, stats = trainer.runner.run(epsilon=epsilon, seed=seed, generator=trainer.generator)
                    got.append(batch)
                    trainer.store(batch, stats)
                    trainer.learn(len(stats.returns))
                assert [name for name in BATCH_FIELDS if not torch.equal(getattr(got[0], name),
                                                                         getattr(got[1], name))] == [], iteration
                assert all(torch.equal(p, q) for p, q in zip(runs[0].agent.parameters(), runs[1].agent.parameters()))
            assert runs[0].counters.updates > 0
        finally:
            for trainer in runs:
                trainer.close()
    assert handed["handed"] > 0 and handed["host"] > 0


def count_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a group collects in lockstep (``GroupRunner.run``) and a run collects alone (``Trainer.collect``)."""
    calls = {"together": 0, "alone": 0}
    group_run, collect = GroupRunner.run, Trainer.collect

    def counted_group_run(self, **kwargs):
        calls["together"] += 1
        return group_run(self, **kwargs)

    def counted_collect(self):
        calls["alone"] += 1
        return collect(self)

    monkeypatch.setattr(GroupRunner, "run", counted_group_run)
    monkeypatch.setattr(Trainer, "collect", counted_collect)
    return calls


def test_group_collect_off_collects_run_by_run_and_trains_the_same_runs(tmp_path, monkeypatch):
    config = config_of("matrix:two_step", "sem-qmix")
    calls = count_calls(monkeypatch)
    together = train_seeds(dataclasses.replace(config, out=str(tmp_path / "on")), SEEDS, progress=False,
                           tensorboard=False)
    assert calls == {"together": config.steps // (2 * config.n_envs), "alone": 0}  # two-step episodes: 2 steps
    calls.update(together=0, alone=0)
    alone = train_seeds(dataclasses.replace(config, group_collect=False, out=str(tmp_path / "off")), SEEDS,
                        progress=False, tensorboard=False)
    assert calls == {"together": 0, "alone": len(SEEDS) * config.steps // (2 * config.n_envs)}
    for (run_dir, result), (want_dir, want_result) in zip(together, alone):
        assert metric_rows(run_dir) == metric_rows(want_dir)  # measured bit for bit in float32 on this CPU
        assert result == want_result


def test_runs_whose_agents_do_not_stack_collect_run_by_run(tmp_path, monkeypatch):
    calls = count_calls(monkeypatch)
    trainers = [Trainer(config_of("matrix:two_step", "qmix", seed=seed, steps=40), tensorboard=False)
                for seed in SEEDS]
    trainers[1].runner.agent = RNNAgent(obs_dim=trainers[1].env.obs_dim, n_agents=2, n_actions=trainers[1].env.n_actions,
                                        hidden_dim=8)  # another size: the stack is refused, the group goes on
    group = MultiTrainer(trainers)
    group.run()
    group.close()
    assert calls == {"together": 0, "alone": len(SEEDS) * 40 // (2 * 4)}


def test_a_stopped_group_collecting_together_resumes_bit_for_bit(tmp_path, monkeypatch):
    calls = count_calls(monkeypatch)
    config = config_of("matrix:two_step", "qmix", save_interval=60)
    longer = train_seeds(dataclasses.replace(config, out=str(tmp_path / "longer")), SEEDS, progress=False,
                         tensorboard=False)
    with pytest.raises(RunStopped) as stopped:
        train_seeds(dataclasses.replace(config, out=str(tmp_path / "split")), SEEDS, tensorboard=False,
                    progress=signal_at(len(SEEDS) * 90, signal.SIGTERM))
    stop = stopped.value
    episodes = {CheckpointManager(d).load_latest()[1]["counters"]["episodes"] for d in stop.run_dirs}
    assert len(episodes) == 1 and stop.env_steps[0] % 60 != 0  # one iteration of the group, off the save schedule
    resumed = resume_seeds(stop.run_dirs, progress=False, tensorboard=False)
    assert calls["together"] > 0 and calls["alone"] == 0
    by_name = {run_dir.name: result for run_dir, result in longer}
    for run_dir, result in resumed:
        assert metric_rows(run_dir) == metric_rows(tmp_path / "longer" / run_dir.name)
        assert result == by_name[run_dir.name]
