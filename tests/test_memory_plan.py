"""A run states its memory before it allocates, and a run that cannot fit is refused in one line (exit 1)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from conftest import NO_ACTOR_FLAGS, PLAN_LINE
from test_replay_buffer import A, O, S, T, U, make_batch
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.replay.buffer import EpisodeReplayBuffer, packed_nbytes
from semzoo.resolution import resolve
from semzoo.run import memory_plan
from semzoo.run.memory_plan import MEMORY_MARGIN, EnvSizes, MemoryPlan


def plan(config: TrainConfig, sizes: EnvSizes, **kwargs: Any) -> MemoryPlan:
    """The memory plan of ``config`` resolved (``semzoo.resolution``), as a run builds it."""
    return memory_plan.plan(resolve(config), sizes, **kwargs)


runner = CliRunner()
SMAX_27M = EnvSizes(n_agents=27, obs_dim=738, state_dim=684, n_actions=36, episode_limit=100)
SMAX_3S5Z = EnvSizes(n_agents=8, obs_dim=205, state_dim=192, n_actions=14, episode_limit=100)
TINY = ["--env", "matrix:climbing", "--algo", "qmix", "--steps", "100", "--batch-size", "4", "--buffer-size", "32",
        "--test-episodes", "4", "--no-tensorboard", *NO_ACTOR_FLAGS]


def test_the_replay_plan_of_a_known_map_counts_every_slot_at_the_limit():
    config = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000)
    p = plan(config, SMAX_27M)
    # float32 obs and state, bool avail and terminated, uint8 actions, float32 reward: per slot
    assert p.slot_bytes == 27 * 738 * 4 + 684 * 4 + 27 * 36 + 27 + 4 + 1 == 83_444
    assert p.replay_worst_slots == 5001 * 101 + 1  # every episode at the limit (the structural worst case)
    assert p.replay_worst == p.replay_worst_slots * p.slot_bytes + 2 * 8 * 5000 > 42e9  # the store and its ring index
    assert p.table == 0  # qmix has no episodic table
    # Expected: 5000 episodes of the measured 26 steps (27 slots), the store grown by half at a time.
    assert 5000 * 27 * p.slot_bytes <= p.replay_expected <= 1.5 * 5000 * 27 * p.slot_bytes + 1e8


def test_a_short_run_is_bounded_by_the_steps_it_can_play():
    short = plan(TrainConfig(env="smax:27m_vs_30m", algo="sem-qmix", steps=5000), SMAX_27M)
    long = plan(TrainConfig(env="smax:27m_vs_30m", algo="sem-qmix", steps=100_000), SMAX_27M)
    assert short.replay_worst < 5e9 < long.replay_worst
    assert short.table > 0  # SEM's table and projection


def test_lossy_storage_halves_the_stored_observations_but_not_a_checkpoints_copy():
    config = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000)
    half = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000, learner=LearnerConfig(replay_dtype="float16"))
    assert plan(config, SMAX_27M).slot_bytes - plan(half, SMAX_27M).slot_bytes == (27 * 738 + 684) * 2
    assert plan(half, SMAX_27M).checkpoint_copy == plan(config, SMAX_27M).checkpoint_copy  # checkpoints hold float32


def test_runs_multiply_and_the_replay_buffers_largest_copy_counts_once_per_group():
    """A checkpoint's packed copy and a growth's copy never coincide, and a group's runs save one after another."""
    config = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000)
    one = plan(config, SMAX_27M)
    assert one.checkpoint_copy > one.growth_copy > 0  # every stored slot, against one field of most of them
    assert one.worst == one.run_worst + one.checkpoint_copy and one.copy_name == "checkpoint copy"
    assert plan(config, SMAX_27M, runs=4).worst == 4 * one.run_worst + one.checkpoint_copy
    assert plan(config, SMAX_27M, runs=4).expected == 4 * one.run_expected + one.copy_expected
    assert " + checkpoint copy 42.2 GB = " in one.line(None)


def test_the_plan_covers_the_peaks_measured_with_a_checkpoints_copy_on_3s5z():
    """0.5M-step 3s5z runs peaked at 7.2-7.5 GB, over a plan of 7.24-7.28 GB that left the checkpoint's copy out."""
    config = TrainConfig(env="smax:3s5z", algo="sem-qmix", steps=500_000)
    the_plan = plan(config, SMAX_3S5Z)
    growth_only = the_plan.worst - the_plan.copy_worst + the_plan.growth_copy  # what the plan counted before
    assert growth_only < 7.5e9 < the_plan.worst
    # every episode at the limit: the copy holds every slot, in a checkpoint's types (int64 actions, no state keys)
    assert the_plan.checkpoint_copy == packed_nbytes(n_agents=8, obs_dim=205, state_dim=192, n_actions=14,
                                                     slots=5000 * 101, episodes=5000)


def test_a_checkpoints_copy_is_what_the_buffers_state_dict_holds():
    buffer = EpisodeReplayBuffer(capacity=4, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=U,
                                 store_dtype="float16")
    for seed, lengths in enumerate(([3, 6], [2, 5, 4])):  # six episodes into four places: the ring wraps
        buffer.insert(make_batch(lengths, seed))
    state = buffer.state_dict()
    held = sum(value.nbytes for value in state.values() if isinstance(value, torch.Tensor))
    slots = int((state["length"] + 1).sum())
    assert held == packed_nbytes(n_agents=A, obs_dim=O, state_dim=S, n_actions=U, slots=slots, episodes=4)


def fake_memory(monkeypatch, n_bytes: int) -> None:
    monkeypatch.setattr(memory_plan, "available_memory", lambda: n_bytes)


def test_train_prints_its_memory_plan_in_one_line(tmp_path):
    result = runner.invoke(app, ["train", *TINY, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("memory plan:")]
    assert len(lines) == 1 and "expected" in lines[0] and "worst" in lines[0] and "available" in lines[0]
    assert "peak RSS" in result.output


def test_a_run_that_cannot_fit_is_refused_before_it_allocates(monkeypatch, tmp_path):
    fake_memory(monkeypatch, 10_000_000)
    result = runner.invoke(app, ["train", *TINY, "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    line = result.output.strip()
    assert line.startswith("Error: memory plan:") and "10 MB available" in line
    assert "--replay-dtype float16" in line and "a machine with more memory" in line
    assert not any(tmp_path.iterdir())  # nothing was built


def test_a_seeds_group_that_cannot_fit_says_how_many_runs_fit(monkeypatch, tmp_path):
    config = TrainConfig(env="matrix:climbing", algo="qmix", steps=100, sequential=True,
                         learner=LearnerConfig(batch_size=4, buffer_size=32))
    one_run = plan(config, memory_plan.env_sizes(config)).run_worst
    fake_memory(monkeypatch, int(3.5 * one_run / MEMORY_MARGIN))
    result = runner.invoke(app, ["train", *TINY, "--seeds", "0-100000", "--out", str(tmp_path)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert "100001 runs of matrix:climbing qmix" in result.output
    assert "3 runs fit (give --seeds 0-2)" in result.output
    assert f"needs up to {memory_plan.gb(one_run)} per run" in result.output


def test_a_seeds_group_that_fits_says_it_is_building_its_runs(tmp_path):
    result = runner.invoke(app, ["train", *TINY, "--seeds", "0-2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    plan_line = next(i for i, line in enumerate(lines) if line.startswith("memory plan: 3 runs x"))
    assert lines[plan_line + 1].startswith("building 3 runs of qmix on matrix:climbing")
    assert [line.split(":")[0] for line in lines if line.startswith("built run")] == [f"built run {i}/3"
                                                                                       for i in (1, 2, 3)]


@pytest.mark.parametrize("available", [None, 10**15])
def test_no_refusal_when_memory_is_unknown_or_ample(available):
    config = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000)
    assert memory_plan.refusal(resolve(config), SMAX_27M, plan(resolve(config), SMAX_27M), available) is None


def test_the_refusal_of_a_big_map_names_a_buffer_size_that_fits():
    config = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000)
    reason = memory_plan.refusal(resolve(config), SMAX_27M, plan(resolve(config), SMAX_27M), 24 * 10**9)
    assert reason is not None and "--buffer-size " in reason
    size = int(reason.split("--buffer-size ")[1].split(";")[0])
    smaller = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000, learner=LearnerConfig(buffer_size=size))
    assert plan(smaller, SMAX_27M).worst <= MEMORY_MARGIN * 24e9


TINY_CONFIG = TrainConfig(env="matrix:climbing", algo="qmix", steps=100, sequential=True, test_episodes=4,
                          learner=LearnerConfig(batch_size=4, buffer_size=32))


def test_a_run_started_from_python_is_refused_in_the_same_line_before_it_allocates(monkeypatch, tmp_path):
    import semzoo

    config = dataclasses.replace(TINY_CONFIG, out=str(tmp_path))
    fake_memory(monkeypatch, 10_000_000)
    with pytest.raises(memory_plan.MemoryPlanRefused, match=r"^memory plan: matrix:climbing qmix .* 10 MB available"):
        semzoo.train(config, progress=False, tensorboard=False)
    assert not list(tmp_path.rglob("config.json")) and not list(tmp_path.rglob("*.ckpt"))
    assert issubclass(memory_plan.MemoryPlanRefused, ValueError)  # the CLI's one-line handling catches it


def test_a_seeds_group_started_from_python_is_refused_for_the_runs_together(monkeypatch, tmp_path):
    import semzoo

    config = dataclasses.replace(TINY_CONFIG, out=str(tmp_path))
    one_run = plan(config, memory_plan.env_sizes(config)).run_worst
    fake_memory(monkeypatch, int(2.5 * one_run / MEMORY_MARGIN))  # one run fits, two do, three do not
    with pytest.raises(memory_plan.MemoryPlanRefused, match=r"3 runs of matrix:climbing qmix .* 2 runs fit"):
        semzoo.train_seeds(config, [0, 1, 2], progress=False, tensorboard=False)
    assert not any(tmp_path.iterdir())  # refused before any run was built
    semzoo.train_seeds(config, [0, 1], progress=False, tensorboard=False)  # two fit: they train
    assert len(list(tmp_path.rglob("final.json"))) == 2


CUDA = torch.device("cuda")
ON_GPU = TrainConfig(env="smax:27m_vs_30m", algo="qmix", steps=500_000, learner=LearnerConfig(replay_device="run"))
"""A run whose replay buffer lives on the run's device (its plan is asked for a CUDA device: no GPU needed)."""


def test_a_replay_buffer_on_the_gpu_is_counted_against_the_gpu_not_the_host():
    on_host = plan(dataclasses.replace(ON_GPU, learner=LearnerConfig()), SMAX_27M, device=CUDA)
    on_gpu = plan(ON_GPU, SMAX_27M, device=CUDA)
    assert on_host.replay_device == "host" and on_gpu.replay_device == "cuda"
    assert on_gpu.replay_worst == on_host.replay_worst > 42e9 and on_host.device_worst == 0
    # on the GPU: the store, and the larger of its growth's copy and the field a save gathers there; on the host: the
    # rest of the run and the checkpoint's packed copy
    assert on_gpu.device_worst == on_gpu.replay_worst + max(on_gpu.growth_copy, on_gpu.save_field_copy)
    assert on_gpu.worst == on_host.worst - on_host.replay_worst - on_host.copy_worst + on_host.checkpoint_copy
    assert plan(ON_GPU, SMAX_27M, device=CUDA, runs=3).device_worst == 3 * on_gpu.replay_worst + on_gpu.device_copy_worst
    line = on_gpu.line(500 * 10**9, 80 * 10**9)
    assert line.startswith("memory plan: (replay buffer on cuda ") and " worst in host memory of 500 GB available; " in line
    assert f"{memory_plan.gb(on_gpu.device_worst)} worst on cuda of 80 GB available; 1 update/episode" in line
    # On the CPU 'run' is the host: the plan is the host's
    assert plan(ON_GPU, SMAX_27M, device=torch.device("cpu")) == plan(dataclasses.replace(ON_GPU, learner=LearnerConfig()),
                                                                      SMAX_27M, device=torch.device("cpu"))


def test_a_replay_buffer_too_big_for_the_gpu_is_refused_with_the_host_among_the_options():
    on_gpu = plan(ON_GPU, SMAX_27M, device=CUDA)
    assert memory_plan.refusal(resolve(ON_GPU), SMAX_27M, on_gpu, 500 * 10**9, None) is None  # the GPU's memory unknown
    assert memory_plan.refusal(resolve(ON_GPU), SMAX_27M, on_gpu, 500 * 10**9, 500 * 10**9) is None
    reason = memory_plan.refusal(resolve(ON_GPU), SMAX_27M, on_gpu, 500 * 10**9, 24 * 10**9)
    assert reason is not None and reason.startswith("memory plan: smax:27m_vs_30m qmix for 500,000 steps needs up to")
    assert f"{memory_plan.gb(on_gpu.replay_worst)} per run on cuda (replay buffer on cuda worst case" in reason
    assert f"plus {memory_plan.gb(on_gpu.device_copy_worst)} at a time for the replay buffer's copy of a field" in reason
    assert "but cuda has 24 GB available" in reason and "a GPU with more memory" in reason
    assert "--replay-device host (" in reason and "worst in host memory, fits)" in reason
    size = int(reason.split("--buffer-size ")[1].split(";")[0])
    smaller = dataclasses.replace(ON_GPU, learner=dataclasses.replace(ON_GPU.learner, buffer_size=size))
    assert plan(smaller, SMAX_27M, device=CUDA).device_worst <= MEMORY_MARGIN * 24e9


def test_check_measures_a_gpu_buffer_against_the_gpu_memory(monkeypatch):
    config = dataclasses.replace(TINY_CONFIG, learner=dataclasses.replace(TINY_CONFIG.learner, replay_device="run"))
    sizes = memory_plan.env_sizes(config)
    fake_memory(monkeypatch, 500 * 10**9)
    monkeypatch.setattr(memory_plan, "device_memory", lambda device: 1000)
    with pytest.raises(memory_plan.MemoryPlanRefused, match=r"per run on cuda .* but cuda has 0.001 MB available"):
        memory_plan.check(resolve(config), sizes, device=CUDA)
    the_plan, available, device_available = memory_plan.check(resolve(config), sizes, device=torch.device("cpu"))
    assert the_plan.replay_device == "host" and available == 500 * 10**9 and device_available is None


def test_train_with_run_on_the_cpu_prints_the_host_plan(tmp_path):
    result = runner.invoke(app, ["train", *TINY, "--replay-device", "run", "--device", "cpu", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("memory plan:")]
    assert PLAN_LINE.match(line) and "cuda" not in line and "host memory" not in line


def test_a_memory_too_big_for_the_machine_is_named_not_the_replay_buffer(tmp_path):
    """A billion LAGMA codes: the codebook is what cannot fit, so the line names --lagma-n-codes and offers no replay
    setting (a smaller buffer or float16 storage would leave the codebook as big)."""
    result = runner.invoke(app, ["train", *TINY, "--algo", "lagma-qmix", "--lagma-latent-dim", "2",
                                 "--lagma-n-codes", "1000000000", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert "the episodic memory" in line and "--lagma-n-codes 1,000,000,000" in line
    assert "give a smaller --lagma-n-codes" in line
    assert "--replay-dtype" not in line and "--buffer-size" not in line
