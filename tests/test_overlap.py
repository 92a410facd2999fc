"""Acting overlaps learning: the next batch is collected by the actor process while the learner updates.

The golden runs (test_golden.py) pin the sequential loop behind ``sequential``; these tests pin the
overlapped one: a seed fixes the run, a resumed run equals an uninterrupted one, it takes the sequential
loop's number of updates, it still learns, and a failure on either thread ends it cleanly.
"""

from __future__ import annotations

import json
import threading

import pytest
from golden_runs import GOLDEN_FILE, metric_rows
from golden_runs import golden_config as golden_config_data
from test_checkpoint import assert_same, comparable_rows
from test_train import greedy_return, matrix_config

from semzoo.config import LearnerConfig, MemoryConfig, TrainConfig
from semzoo.run.checkpoint import CheckpointManager, load_checkpoint, save_checkpoint
from semzoo.run.rundir import load_run_config, run_finished
from semzoo.run.trainer import Trainer, resume, train
from semzoo.runfiles import FINAL_FILE

ACTING_THREAD = "semzoo-acting"
GOLDEN = json.loads(GOLDEN_FILE.read_text())


def acting_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(ACTING_THREAD)]


def golden_config(env: str, algo: str, out, *, sequential: bool = False, **overrides) -> TrainConfig:
    """The golden run of (env, algo) (tests/golden_runs.py), in overlap mode unless ``sequential``."""
    return TrainConfig.from_dict({**golden_config_data(env, algo, out, overrides), "sequential": sequential})


def rows_and_final(config: TrainConfig):
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return metric_rows(run_dir), json.loads((run_dir / FINAL_FILE).read_text())


def _seeded_cases():
    for env, algo in [("matrix:two_step", "qmix"), ("matrix:two_step", "sem-qmix"), ("matrix:climbing", "saem-vdn"),
                      ("matrix:climbing", "cw-qmix"), ("matrix:two_step", "sem-ow-qmix"), ("smax:3m", "sem-qmix"),
                      ("smax:3m", "ow-qmix")]:
        marks = [pytest.mark.smax, pytest.mark.slow] if env.startswith("smax:") else []
        yield pytest.param(env, algo, marks=marks, id=f"{env}|{algo}")


@pytest.mark.parametrize(("env", "algo"), list(_seeded_cases()))
def test_overlapped_run_is_fixed_by_its_seed_and_takes_the_sequential_loops_updates(env, algo, tmp_path):
    if env.startswith("smax:"):
        pytest.importorskip("jaxmarl")
    first, final = rows_and_final(golden_config(env, algo, tmp_path / "first"))
    second, _ = rows_and_final(golden_config(env, algo, tmp_path / "second"))
    assert len(first) > 20 and first == second  # bit for bit, every value
    sequential = GOLDEN[f"{env}|{algo}"]  # the same config run by the sequential loop
    assert first != sequential  # acting lags: another run than the sequential loop's
    # One update per collected episode (the first batch fills the replay batch), the last batch's included;
    # the final evaluation comes after the last update.
    assert final["updates"] == final["episodes"] == first[-1][2]
    if env.startswith("matrix:"):  # fixed episode lengths: the sequential run collected as many episodes
        assert first[-1][:3] == sequential[-1][:3]


@pytest.mark.parametrize("updates_per_episode", [0.5, 1.5])
def test_overlapped_run_takes_as_many_updates_as_the_sequential_loop(updates_per_episode, tmp_path):
    finals = []
    for sequential in (True, False):
        config = golden_config("matrix:climbing", "sem-qmix", tmp_path / str(sequential), sequential=sequential,
                               learner={"updates_per_episode": updates_per_episode, "batch_size": 4,
                                        "buffer_size": 16, "target_update_episodes": 8, "lr": 5e-3})
        finals.append(rows_and_final(config)[1])
    assert finals[0]["updates"] > 0
    assert [(f["env_steps"], f["episodes"], f["updates"]) for f in finals] == [
        (finals[0]["env_steps"], finals[0]["episodes"], finals[0]["updates"])] * 2


def resumable_config(out, *, steps: int, sequential: bool = False) -> TrainConfig:
    """Two-step game, 4 envs: 8 env steps per iteration, a checkpoint every 40, a table update every 30."""
    return TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=steps, seed=5, n_envs=4, out=str(out),
                       run_name="run", sequential=sequential, test_interval=80, test_episodes=4, log_interval=40,
                       save_interval=40, memory=MemoryConfig(pending_size=30, capacity=500),
                       learner=LearnerConfig(batch_size=4, buffer_size=16, target_update_episodes=10, lr=5e-3))


def interrupt_at(env_steps: int):
    def progress(state):
        if state["env_steps"] >= env_steps:
            raise KeyboardInterrupt

    return progress


def test_interrupted_overlapped_run_resumes_to_the_uninterrupted_run(tmp_path):
    total = 240
    straight_dir, _ = train(resumable_config(tmp_path / "straight", steps=total), progress=False, tensorboard=False)
    with pytest.raises(KeyboardInterrupt):
        train(resumable_config(tmp_path / "split", steps=total), progress=interrupt_at(130), tensorboard=False)
    assert acting_threads() == []  # the collecting thread ended with the run
    split_dir = tmp_path / "split" / "run"
    assert not run_finished(split_dir)
    _, payload = CheckpointManager(split_dir).load_latest()
    assert payload["counters"]["env_steps"] == 120 and payload["counters"]["update_credit"] >= 1  # updates owed
    resume(split_dir, progress=False, tensorboard=False)

    _, straight = CheckpointManager(straight_dir).load_latest()
    _, split = CheckpointManager(split_dir).load_latest()
    for key in ("learner", "acting", "buffer", "memory", "rng", "loop", "counters"):
        if key == "counters":
            straight[key].pop("wall_time"), split[key].pop("wall_time")
        assert_same(straight[key], split[key], key)
    rows = comparable_rows(straight_dir)
    assert len(rows) > 50 and rows == comparable_rows(split_dir)


def test_a_run_directory_without_the_key_was_trained_sequentially_and_resumes_so(tmp_path):
    """A 0.2 run directory: config.json and checkpoints without ``sequential``."""
    total = 240
    straight_dir, _ = train(resumable_config(tmp_path / "straight", steps=total, sequential=True), progress=False,
                            tensorboard=False)
    old_dir, _ = train(resumable_config(tmp_path / "old", steps=120, sequential=True), progress=False,
                       tensorboard=False)
    config = json.loads((old_dir / "config.json").read_text())
    del config["sequential"]
    (old_dir / "config.json").write_text(json.dumps(config))
    for path in CheckpointManager(old_dir).paths():
        payload = load_checkpoint(path)
        del payload["config"]["sequential"]
        save_checkpoint(path, payload)
    assert load_run_config(old_dir).sequential is True
    assert TrainConfig.from_dict(config).sequential is TrainConfig().sequential  # a user's config: the default

    resume(old_dir, steps=total, progress=False, tensorboard=False)
    assert comparable_rows(old_dir) == comparable_rows(straight_dir)


@pytest.mark.slow
def test_overlapped_sem_vdn_reaches_the_optimum_of_the_additive_game():
    from semzoo import make_env

    optimum = make_env("matrix:additive").optimal_return
    assert greedy_return(matrix_config("additive", "sem-vdn", sequential=False,
                                       memory=MemoryConfig(pending_size=500))) == optimum


def test_an_exception_in_the_collecting_thread_is_raised_by_run(tmp_path, monkeypatch):
    """The thread collector (the actor process's fallback; test_actor.py has the process's own test)."""
    import flaky_env

    monkeypatch.setattr(Trainer, "acting_in_process", False)

    raised_in: list[str] = []
    step = flaky_env.FlakyMatrixGame.step

    def recording_step(self, actions):
        try:
            return step(self, actions)
        except flaky_env.FlakyEnvError:
            raised_in.append(threading.current_thread().name)
            raise

    monkeypatch.setattr(flaky_env.FlakyMatrixGame, "step", recording_step)
    config = TrainConfig(env="pz:flaky_env:climbing", env_args={"marker": str(tmp_path / "marker"), "fail_after": 12},
                         algo="qmix", steps=400, n_envs=4, sequential=False, out=str(tmp_path), test_interval=10**9,
                         learner=LearnerConfig(batch_size=4, buffer_size=16))
    with pytest.raises(flaky_env.FlakyEnvError, match="injected failure after 12 steps"):
        train(config, progress=False, tensorboard=False)
    assert len(raised_in) == 1 and raised_in[0].startswith(ACTING_THREAD)
    assert acting_threads() == []
