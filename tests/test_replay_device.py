"""``learner.replay_device``: the replay buffer on the run's device. On the CPU 'run' is the host, so a run is the
same bit for bit; off the CPU a sample is gathered where the store is (the GPU half is in tests/test_gpu.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from conftest import NO_ACTOR_FLAGS
from test_checkpoint import assert_same, comparable_rows
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import AgentConfig, LearnerConfig, MemoryConfig, TrainConfig
from semzoo.replay.buffer import EpisodeReplayBuffer
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.trainer import resume, train
from semzoo.types import EpisodeBatch

runner = CliRunner()
TINY = ["--env", "matrix:two_step", "--algo", "qmix", "--steps", "40", "--n-envs", "4", "--batch-size", "4",
        "--buffer-size", "16", "--test-episodes", "4", "--no-tensorboard", *NO_ACTOR_FLAGS]


def small_run(out, *, replay_device: str, steps: int = 200, run_name: str = "run") -> TrainConfig:
    """SEM-QMIX on the two-step game: 2-step episodes, 4 envs; the 12-episode buffer wraps, the table updates."""
    return TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=steps, n_envs=4, out=str(out), run_name=run_name,
                       sequential=True, test_interval=40, test_episodes=4, log_interval=20, save_interval=60,
                       agent=AgentConfig(hidden_dim=16), memory=MemoryConfig(pending_size=20, capacity=500),
                       learner=LearnerConfig(batch_size=4, buffer_size=12, target_update_episodes=8,
                                             replay_device=replay_device))  # type: ignore[arg-type]


def final_state(run_dir) -> dict:
    _, state = CheckpointManager(run_dir).load_latest()
    state["counters"].pop("wall_time")
    return state


SAME_PARTS = ("learner", "buffer", "memory", "rng", "loop", "counters", "best")
"""The checkpoint parts two runs that learned alike end with bit for bit (``config`` names the setting itself)."""


def test_the_replay_device_flag_reaches_the_config(tmp_path):
    result = runner.invoke(app, ["train", *TINY, "--replay-device", "run", "--device", "cpu", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [config_file] = tmp_path.rglob("config.json")
    assert json.loads(config_file.read_text())["learner"]["replay_device"] == "run"


def test_a_bad_replay_device_is_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", *TINY, "--replay-device", "gpu", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert line.startswith("Error: Invalid value for '--replay-device': 'gpu' is not one of 'host', 'run'.")
    assert not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match=r"^replay_device='gpu': expected one of 'host', 'run'"):
        LearnerConfig(replay_device="gpu")  # type: ignore[arg-type]


def test_run_on_the_cpu_learns_bit_for_bit_as_host(tmp_path):
    host_dir, _ = train(small_run(tmp_path, replay_device="host"), progress=False, tensorboard=False)
    run_dir, _ = train(small_run(tmp_path, replay_device="run", run_name="on-run"), progress=False, tensorboard=False)
    host, on_run = final_state(host_dir), final_state(run_dir)
    assert host["counters"]["updates"] > 0 and host["buffer"]["size"] == 12 and host["memory"]["n_entries"] > 0
    for part in SAME_PARTS:
        assert_same(host[part], on_run[part], part)
    assert comparable_rows(host_dir) == comparable_rows(run_dir)
    assert on_run["config"]["learner"]["replay_device"] == "run"


def test_a_run_checkpointed_with_run_resumes_exactly(tmp_path):
    straight_dir, _ = train(small_run(tmp_path / "straight", replay_device="run"), progress=False, tensorboard=False)
    half_dir, _ = train(small_run(tmp_path / "split", replay_device="run", steps=100), progress=False,
                        tensorboard=False)
    buffer = final_state(half_dir)["buffer"]
    assert all(value.device.type == "cpu" for value in buffer.values() if isinstance(value, torch.Tensor))
    resume(half_dir, steps=200, progress=False, tensorboard=False)
    straight, split = final_state(straight_dir), final_state(half_dir)
    for part in SAME_PARTS:
        assert_same(straight[part], split[part], part)
    assert comparable_rows(straight_dir) == comparable_rows(half_dir)


def episodes(n: int, t: int, *, lengths: list[int]) -> EpisodeBatch:
    """``n`` host episodes of up to ``t`` steps, 2 agents, 3 features, 4 actions, with state keys of 2 words."""
    g = torch.Generator().manual_seed(0)
    return EpisodeBatch(obs=torch.randn(n, t + 1, 2, 3, generator=g), state=torch.randn(n, t + 1, 5, generator=g),
                        avail=torch.ones(n, t + 1, 2, 4, dtype=torch.bool),
                        actions=torch.randint(0, 4, (n, t, 2), generator=g), reward=torch.randn(n, t, generator=g),
                        terminated=torch.zeros(n, t, dtype=torch.bool),
                        filled=torch.arange(t)[None, :] < torch.tensor(lengths)[:, None],
                        length=torch.tensor(lengths), state_keys=torch.randint(0, 99, (n, t + 1, 2), dtype=torch.int32))


def test_a_buffer_off_the_cpu_gathers_its_samples_where_it_is():
    # The meta device holds no data, but it runs the off-CPU path: every sampled tensor is made on the device.
    buffer = EpisodeReplayBuffer(capacity=6, max_t=4, n_agents=2, obs_dim=3, state_dim=5, n_actions=4, device="meta",
                                 state_key_words=2)
    for _ in range(3):  # the store grows and the ring wraps
        buffer.insert(episodes(3, 4, lengths=[4, 1, 3]))
    assert len(buffer) == 6 and all(value.device.type == "meta" for value in buffer.store.values())
    assert buffer.offset.device.type == "cpu" and buffer.length.device.type == "cpu"  # the ring's index: host
    batch = buffer.sample(4, torch.Generator().manual_seed(0))
    assert all(value.device.type == "meta" for value in batch.tensors().values())
    assert batch.obs.shape == (4, batch.max_t + 1, 2, 3) and batch.state_keys is not None
    assert batch.for_update("meta") is batch  # already where the update runs: no copy


def test_the_stored_episodes_come_in_slices_as_a_whole():
    # A resume rebuilds the state keys a slice of the buffer at a time (Trainer.load_state_dict).
    buffer = EpisodeReplayBuffer(capacity=6, max_t=4, n_agents=2, obs_dim=3, state_dim=5, n_actions=4,
                                 state_key_words=2)
    for _ in range(3):
        buffer.insert(episodes(3, 4, lengths=[4, 1, 3]))
    whole, parts = buffer.stored(), [buffer.stored(first, first + 4) for first in (0, 4)]
    assert [p.batch_size for p in parts] == [4, 2]
    for name, value in whole.tensors().items():
        assert torch.equal(torch.cat([p.tensors()[name] for p in parts]), value), name
