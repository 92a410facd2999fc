"""The GPU path: every algorithm id trains with ``device="cuda"`` (skipped where no GPU is visible).

The CPU-side half runs everywhere: exploration draws its random numbers on the CPU from the run's
generator whatever device the Q values are on (a CPU generator cannot draw on a GPU), so a seed
explores alike on every device; and every GRU that is copied (target networks, the acting agent) or
loaded (resume) has its weights laid out again in one chunk, which cuDNN needs to run it without
compacting them at every call.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings

import pytest
import torch
from golden_runs import metric_rows

from semzoo import TrainConfig, algorithm_ids, train, train_seeds
from semzoo.agents.rnn import RNNAgent
from semzoo.agents.selection import epsilon_greedy
from semzoo.config import LearnerConfig
from semzoo.replay.buffer import EpisodeReplayBuffer
from semzoo.resolution import resolve
from semzoo.run import memory_plan
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.device import share_gpu_with_jax
from semzoo.run.multi import MultiTrainer
from semzoo.run.trainer import Trainer
from semzoo.types import EpisodeBatch, packed_copy

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")
SMALL = LearnerConfig(batch_size=4, buffer_size=16)


def test_exploration_draws_on_the_cpu_generator_whatever_the_device():
    avail = torch.ones(4, 3, 5, dtype=torch.bool)
    avail[:, :, 0] = False
    q = torch.zeros(4, 3, 5)
    on_cpu = epsilon_greedy(q, avail, 1.0, torch.Generator().manual_seed(3))
    on_meta = epsilon_greedy(q.to("meta"), avail.to("meta"), 1.0, torch.Generator().manual_seed(3))
    assert on_meta.device.type == "meta" and on_meta.shape == on_cpu.shape
    assert (on_cpu > 0).all()  # never the unavailable action 0


@needs_gpu
@pytest.mark.parametrize("algo", algorithm_ids())
def test_every_algorithm_trains_on_the_gpu(tmp_path, algo):
    config = TrainConfig(env="matrix:two_step", algo=algo, steps=200, n_envs=4, test_interval=100, test_episodes=4,
                         device="cuda", out=str(tmp_path), learner=SMALL)
    _, result = train(config, progress=False)
    assert math.isfinite(result["test_return_mean"])


@needs_gpu
@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "saem-ow-qmix"])
def test_the_first_loss_on_the_gpu_equals_the_cpu_one(algo):
    losses = {}
    for device in ("cpu", "cuda"):
        trainer = Trainer(TrainConfig(env="matrix:two_step", algo=algo, steps=40, n_envs=4, device=device,
                                      learner=SMALL))
        try:
            trainer.collect()
            batch = trainer.buffer.sample(4, torch.Generator().manual_seed(0)).to(trainer.device)
            losses[device] = trainer.learner.compute_loss(batch)[0].item()
        finally:
            trainer.close()
    assert losses["cuda"] == pytest.approx(losses["cpu"], rel=1e-5)


CHUNK_WARNING = "not part of single contiguous chunk of memory"
"""What cuDNN says when a GRU's weights lie in separate tensors (it then compacts them at every call)."""


def _own_weights(gru: torch.nn.RNNBase) -> bool:
    """The GRU's list of weights (what cuDNN reads) holds its own parameters, not another module's."""
    return all(w is getattr(gru, name) for w, name in zip(gru._flat_weights, gru._flat_weights_names))


def test_copied_and_resumed_agents_lay_their_gru_weights_out_again(tmp_path, monkeypatch):
    events: list[tuple[str, int]] = []
    flatten, load = torch.nn.RNNBase.flatten_parameters, RNNAgent.load_state_dict

    def spy_flatten(self):
        events.append(("flatten", id(self)))
        return flatten(self)

    def spy_load(self, *args, **kwargs):
        events.append(("load", id(self.rnn)))
        return load(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.RNNBase, "flatten_parameters", spy_flatten)
    monkeypatch.setattr(RNNAgent, "load_state_dict", spy_load)
    config = TrainConfig(env="matrix:two_step", algo="sem-ow-qmix", steps=48, n_envs=4, sequential=False,
                         test_interval=10**6, test_episodes=4, device="cpu", out=str(tmp_path), learner=SMALL)
    trainer = Trainer(config)
    copies = [trainer.learner.target_agent.rnn, trainer.learner.target_central_agent.rnn, trainer.acting_agent.rnn]
    trainer.close()
    for gru in copies:
        assert ("flatten", id(gru)) in events
        assert _own_weights(gru)  # a deep copy's GRU reads the copy's weights

    run_dir, _ = train(config, progress=False)
    events.clear()
    resumed = Trainer.resume(run_dir, steps=96, tensorboard=False)
    try:
        learner = resumed.learner
        agents = [learner.agent, learner.target_agent, learner.central_agent, learner.target_central_agent,
                  resumed.acting_agent]
        for agent in agents:
            loaded = [i for i, event in enumerate(events) if event == ("load", id(agent.rnn))]
            assert loaded, "every agent network is loaded from the checkpoint"
            assert ("flatten", id(agent.rnn)) in events[loaded[-1]:], "flattened after its last load"
            assert _own_weights(agent.rnn)
    finally:
        resumed.close()


@needs_gpu
@pytest.mark.parametrize("algo", ["sem-qmix", "ow-qmix"])
def test_a_cuda_run_keeps_every_gru_in_one_chunk(tmp_path, monkeypatch, algo):
    monkeypatch.setattr(Trainer, "acting_in_process", False)  # the acting agent's warnings reach this process
    config = TrainConfig(env="matrix:two_step", algo=algo, steps=200, n_envs=4, test_interval=100, test_episodes=4,
                         device="cuda", out=str(tmp_path), learner=SMALL)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_dir, _ = train(config, progress=False)
        resumed = Trainer.resume(run_dir, steps=240, tensorboard=False)
        try:
            resumed.run()
            grus = [m for net in [*resumed.learner.networks().values(), resumed.acting_agent]
                    for m in net.modules() if isinstance(m, torch.nn.GRU)]
        finally:
            resumed.close()
    assert not [w for w in caught if CHUNK_WARNING in str(w.message)]
    for gru in grus:  # cuDNN's layout: every weight a view of one buffer
        assert len({p.untyped_storage().data_ptr() for p in gru.parameters()}) == 1


def test_a_packed_copy_gives_every_field_back_bit_for_bit():
    fields = {"obs": torch.randn(3, 5, 2, 7), "avail": torch.rand(3, 5, 2, 4) > 0.5, "length": torch.arange(3),
              "keys": torch.randint(-2**31, 2**31 - 1, (3, 5, 3), dtype=torch.int32),
              "actions": torch.randint(0, 200, (3, 4, 2), dtype=torch.uint8), "empty": torch.zeros(0, 3)}
    moved = packed_copy(fields, "cpu")
    for name, value in fields.items():
        assert moved[name].dtype == value.dtype and moved[name].shape == value.shape
        assert torch.equal(moved[name], value), name


def test_an_update_batch_on_the_cpu_is_the_sampled_batch_itself():
    trainer = Trainer(TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=40, n_envs=4, device="cpu",
                                  sequential=True, learner=SMALL))
    try:
        trainer.collect()
        batch = trainer.buffer.sample(4, torch.Generator().manual_seed(0))
        same = batch.for_update("cpu")
        assert all(same_value is batch.tensors()[name] for name, same_value in same.tensors().items())
    finally:
        trainer.close()


@pytest.mark.parametrize(("device", "preset", "expected"), [
    ("cuda", {}, "false"),  # a CUDA run: JAX allocates as it needs
    ("cuda", {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, "true"),  # the user's choice stands
    ("cuda", {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}, None),  # a fraction the user gave decides
    ("cpu", {}, None),  # the CPU path is left alone
])
def test_jax_does_not_take_the_gpu_memory_torch_needs(monkeypatch, device, preset, expected):
    for name in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in preset.items():
        monkeypatch.setenv(name, value)
    share_gpu_with_jax(torch.device(device))
    assert os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") == expected


@needs_gpu
def test_an_update_batch_reaches_the_gpu_in_one_copy_with_its_keys_on_the_host():
    trainer = Trainer(TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=40, n_envs=4, device="cuda",
                                  sequential=True, learner=SMALL))
    try:
        trainer.collect()
        batch = trainer.buffer.sample(4, torch.Generator().manual_seed(0))
        moved = batch.for_update(trainer.device)
        assert moved.state_keys is not None and moved.state_keys.device.type == "cpu"
        for name, value in batch.tensors().items():
            assert torch.equal(getattr(moved, name).cpu(), value), name
        assert moved.reward.device.type == "cuda"
        assert math.isfinite(trainer.learner.train(moved)["loss"])
    finally:
        trainer.close()


ON_RUN = dataclasses.replace(SMALL, replay_device="run")
"""The replay buffer on the run's device."""


@needs_gpu
def test_a_replay_buffer_on_the_gpu_hands_an_update_its_gathered_batch_with_no_host_copy(monkeypatch):
    trainer = Trainer(TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=40, n_envs=4, device="cuda",
                                  sequential=True, learner=ON_RUN))
    try:
        trainer.collect()
        assert all(value.device.type == "cuda" for value in trainer.buffer.store.values())

        def no_copy(*args, **kwargs):
            raise AssertionError("an update's batch was copied from the host")

        monkeypatch.setattr("semzoo.types.packed_copy", no_copy)
        monkeypatch.setattr(EpisodeBatch, "to", no_copy)
        gathered: list[EpisodeBatch] = []
        gather = trainer.buffer._gather
        monkeypatch.setattr(trainer.buffer, "_gather", lambda *args: gathered.append(gather(*args)) or gathered[-1])
        trainer.counters.update_credit = 1.0
        batch = trainer.next_update_batch()
        assert batch is not None and batch is gathered[0]  # the gather's output itself
        assert batch.state_keys is not None and all(value.device.type == "cuda" for value in batch.tensors().values())
        assert math.isfinite(trainer.learner.train(batch)["loss"])
    finally:
        trainer.close()


@needs_gpu
def test_a_cuda_run_with_its_replay_buffer_on_the_gpu_trains_and_resumes_on_either_device(tmp_path):
    config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=200, n_envs=4, test_interval=100, test_episodes=4,
                         sequential=True, device="cuda", out=str(tmp_path), learner=ON_RUN)
    run_dir, result = train(config, progress=False)
    assert math.isfinite(result["test_return_mean"])
    _, state = CheckpointManager(run_dir).load_latest()
    assert all(v.device.type == "cpu" for v in state["buffer"].values() if isinstance(v, torch.Tensor))
    resumed = Trainer.resume(run_dir, steps=240, tensorboard=False)
    try:
        assert resumed.buffer.store["obs"].device.type == "cuda"
        resumed.run()
        assert resumed.counters.env_steps >= 240 and math.isfinite(resumed._last_eval["test_return_mean"])
        on_gpu = resumed.buffer.state_dict()
    finally:
        resumed.close()
    # The GPU run's checkpoint resumes on the CPU, and a CPU buffer's state loads on the GPU, alike.
    on_cpu = Trainer(dataclasses.replace(config, device="cpu", steps=240), _checkpoint=state)
    try:
        assert on_cpu.buffer.store["obs"].device.type == "cpu"
        for name, value in state["buffer"].items():
            assert not isinstance(value, torch.Tensor) or torch.equal(on_cpu.buffer.state_dict()[name], value), name
        on_cpu.run()
        assert on_cpu.counters.env_steps >= 240
        back = EpisodeReplayBuffer(capacity=16, max_t=on_cpu.max_t, n_agents=on_cpu.env.n_agents,
                                   obs_dim=on_cpu.env.obs_dim, state_dim=on_cpu.env.state_dim,
                                   n_actions=on_cpu.env.n_actions, device="cuda")
        back.load_state_dict(on_gpu)
        assert back.store["obs"].device.type == "cuda"
        for name, value in back.state_dict().items():
            assert not isinstance(value, torch.Tensor) or torch.equal(value, on_gpu[name]), name
    finally:
        on_cpu.close()


@needs_gpu
def test_a_group_keeps_each_runs_replay_buffer_on_the_gpu(tmp_path):
    config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=120, n_envs=4, test_interval=60, test_episodes=4,
                         device="cuda", out=str(tmp_path), learner=ON_RUN)
    results = train_seeds(config, [0, 1], progress=False, tensorboard=False)
    assert len(results) == 2 and all(math.isfinite(r["test_return_mean"]) for _, r in results)


@needs_gpu
def test_the_memory_plan_counts_a_gpu_replay_buffer_on_the_gpu():
    config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=200, device="cuda", learner=ON_RUN)
    the_plan, _, device_available = memory_plan.check(resolve(config), memory_plan.env_sizes(config))
    assert the_plan.replay_on_device and the_plan.replay_device == "cuda" and device_available is not None
    assert device_available > 0 and " worst on cuda of " in the_plan.line(None, device_available)


def group_losses(config: TrainConfig, seeds: list[int]) -> tuple[bool, list[list[float]]]:
    """Train ``config`` as a group of ``seeds``: whether its stacked update was compiled, and each run's logged losses."""
    group = MultiTrainer.create(config, seeds, tensorboard=False)
    try:
        compiled = group._stacked is not None and group._stacked.compiled_loss is not None
        results = group.run()
    finally:
        group.close()
    assert all(math.isfinite(result["test_return_mean"]) for result in results)
    return compiled, [[row[4] for row in metric_rows(t.run_dir) if row[3] == "loss"] for t in group.trainers]


@needs_gpu
def test_a_group_with_the_compiled_update_trains_on_the_gpu_close_to_the_plain_group(tmp_path):
    """``--seeds 0-1 --compile-update`` on CUDA: the vmapped loss compiled (CUDA graphs), losses as the plain group's."""
    losses = {}
    for compile_update in (False, True):
        config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=200, n_envs=4, test_interval=100,
                             test_episodes=4, log_interval=40, device="cuda", compile_update=compile_update,
                             out=str(tmp_path / f"compile_{compile_update}"), learner=SMALL)
        compiled, losses[compile_update] = group_losses(config, [0, 1])
        assert compiled == compile_update
    assert all(len(run) >= 3 for run in losses[False])  # a few logged windows of updates per run
    assert losses[True] == pytest.approx(losses[False], rel=1e-3)


@needs_gpu
def test_smax_hands_the_agents_inputs_to_torch_on_the_gpu_without_a_host_copy():
    """JAX on the GPU -> torch CUDA tensors through DLPack: env k's inputs of a grouped reset and step are row k of
    the call's JAX buffers on the GPU, with the values of the host arrays."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("jaxmarl")
    if jax.default_backend() != "gpu":
        pytest.skip(f"JAX runs on {jax.default_backend()}, not on the GPU")
    import numpy as np

    from semzoo.envs.smax import SMAXVecEnv

    envs = [SMAXVecEnv("3m", 4), SMAXVecEnv("3m", 4)]
    arrays = SMAXVecEnv.reset_together(envs, [0, 4])
    for _ in range(2):  # after the grouped reset, then after a grouped step
        for k, (env, host) in enumerate(zip(envs, arrays)):
            got = env.agent_inputs(torch.device("cuda"))
            assert got is not None, "JAX's GPU arrays were not handed to torch's GPU"
            obs, avail = got
            inputs, row = env._handed
            assert obs.device.type == avail.device.type == "cuda" and row == k
            assert obs.data_ptr() == inputs.obs.unsafe_buffer_pointer() + k * obs.nbytes
            assert avail.data_ptr() == inputs.avail.unsafe_buffer_pointer() + k * avail.nbytes
            assert torch.equal(obs.cpu(), torch.from_numpy(host.obs)) and torch.equal(avail.cpu(), torch.from_numpy(host.avail))
        assert envs[0].agent_inputs(torch.device("cpu")) is None  # a CPU run converts the host arrays
        first_legal = [np.asarray(a.avail).argmax(-1) for a in arrays]
        arrays = [result[0] for result in SMAXVecEnv.step_together(envs, first_legal) if result is not None]
