"""The actor process (semzoo.run.actor): overlap mode's collector in a child process.

It must give the thread collector's run bit for bit (metric rows and checkpoints), raise the child's
errors as they were raised there, fall back to the thread for an env a new process cannot build, and
leave no child process behind, however the run ends.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import threading
import warnings
from pathlib import Path

import pytest
from golden_runs import metric_rows
from test_checkpoint import assert_same
from test_overlap import golden_config

import semzoo
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.envs import matrix_game_v0
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.trainer import Trainer


def child_processes() -> list[int]:
    """Live (not zombie) processes whose parent is this one."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if int(ppid) == me and state != "Z":
            found.append(int(entry.name))
    return found


def run_with(config: TrainConfig, run_dir: Path, *, in_process: bool, progress=None) -> Trainer:
    trainer = Trainer(config, run_dir=run_dir, tensorboard=False, progress=progress)
    trainer.acting_in_process = in_process
    try:
        trainer.run()
    finally:
        trainer.close()
    return trainer


def _cases():
    for env, algo in [("matrix:two_step", "sem-qmix"), ("matrix:climbing", "saem-vdn"), ("smax:3m", "sem-qmix")]:
        marks = [pytest.mark.smax, pytest.mark.slow] if env.startswith("smax:") else []
        yield pytest.param(env, algo, marks=marks, id=f"{env}|{algo}")


@pytest.mark.parametrize(("env", "algo"), list(_cases()))
def test_the_actor_process_gives_the_thread_collectors_run_bit_for_bit(env, algo, tmp_path):
    if env.startswith("smax:"):
        pytest.importorskip("jaxmarl")
    config = golden_config(env, algo, tmp_path)
    before = child_processes()
    process = run_with(config, tmp_path / "process", in_process=True)
    assert process.actor_startup_s is not None and process.actor_startup_s > 0  # the actor did collect
    assert child_processes() == before  # and is gone
    thread = run_with(config, tmp_path / "thread", in_process=False)
    assert thread.actor_startup_s is None
    rows = metric_rows(tmp_path / "process")
    assert len(rows) > 20 and rows == metric_rows(tmp_path / "thread")  # every value, bit for bit
    _, by_process = CheckpointManager(tmp_path / "process").load_latest()
    _, by_thread = CheckpointManager(tmp_path / "thread").load_latest()
    for key in ("learner", "acting", "buffer", "memory", "rng", "loop"):
        assert_same(by_process[key], by_thread[key], key)  # acting generator and parameters included


def flaky_config(tmp_path: Path) -> TrainConfig:
    return TrainConfig(env="pz:flaky_env:climbing", sequential=False,
                       env_args={"marker": str(tmp_path / "marker"), "fail_after": 12}, algo="qmix", steps=400,
                       n_envs=4, out=str(tmp_path), test_interval=10**9,
                       learner=LearnerConfig(batch_size=4, buffer_size=16))


def test_an_exception_in_the_actor_process_is_raised_by_run_as_its_own_type(tmp_path):
    import flaky_env

    before = child_processes()
    with pytest.raises(flaky_env.FlakyEnvError, match="injected failure after 12 steps") as raised:
        run_with(flaky_config(tmp_path), tmp_path / "run", in_process=True)
    assert any("actor process" in note and "FlakyEnvError" in note for note in raised.value.__notes__)
    assert (tmp_path / "marker").exists()  # the child's env raised it
    assert child_processes() == before


def test_an_interrupted_run_leaves_no_actor_process(tmp_path):
    def interrupt(state):
        if state["env_steps"] >= 40:
            raise KeyboardInterrupt

    before = child_processes()
    with pytest.raises(KeyboardInterrupt):
        run_with(golden_config("matrix:two_step", "qmix", tmp_path), tmp_path / "run", in_process=True,
                 progress=interrupt)
    assert child_processes() == before


def test_an_actor_process_that_dies_is_a_clear_error(tmp_path):
    trainer: Trainer | None = None

    def kill_actor(state):
        assert trainer is not None
        actor = getattr(trainer._collector, "actor", None)  # the overlapped collector's actor process
        assert actor is not None and actor.pid is not None
        if state["env_steps"] >= 40:
            os.kill(actor.pid, signal.SIGKILL)

    before = child_processes()
    trainer = Trainer(golden_config("matrix:two_step", "qmix", tmp_path), tensorboard=False, progress=kill_actor)
    try:
        with pytest.raises(RuntimeError, match=r"actor process .* died \(exit code -9\)"):
            trainer.run()
    finally:
        trainer.close()
    assert child_processes() == before


def test_an_env_registered_in_a_plugin_is_built_by_the_actor_process(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMZOO_PLUGINS", "plugin_envs")  # the child imports it; so does this process
    config = TrainConfig(env="plugin_coin_game", algo="vdn", sequential=False, steps=120, n_envs=4, out=str(tmp_path),
                         test_interval=60, learner=LearnerConfig(batch_size=4, buffer_size=16))
    process = run_with(config, tmp_path / "process", in_process=True)
    assert process.actor_startup_s is not None
    run_with(config, tmp_path / "thread", in_process=False)
    assert metric_rows(tmp_path / "process") == metric_rows(tmp_path / "thread")


def test_an_env_registered_in_this_process_with_an_importable_factory_is_built_by_the_actor_process(tmp_path):
    factory = functools.partial(matrix_game_v0.parallel_env, "custom", payoff=[[5, 0], [0, 3]])
    semzoo.register_env("actor_test_partial", factory, replace=True)  # no plugin: the child gets it by pickle
    config = TrainConfig(env="actor_test_partial", algo="vdn", sequential=False, steps=120, n_envs=4, out=str(tmp_path),
                         test_interval=60, learner=LearnerConfig(batch_size=4, buffer_size=16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the thread
        process = run_with(config, tmp_path / "process", in_process=True)
    assert process.actor_startup_s is not None
    run_with(config, tmp_path / "thread", in_process=False)
    assert metric_rows(tmp_path / "process") == metric_rows(tmp_path / "thread")


def test_an_env_a_new_process_cannot_build_falls_back_to_the_thread(tmp_path):
    semzoo.register_env("actor_test_only_here", lambda: matrix_game_v0.parallel_env("penalty"), overwrite=True)
    config = TrainConfig(env="actor_test_only_here", algo="vdn", sequential=False, steps=120, n_envs=4,
                         out=str(tmp_path), test_interval=60, learner=LearnerConfig(batch_size=4, buffer_size=16))
    collectors: list[str] = []
    step = matrix_game_v0.MatrixGameEnv.step

    def recording_step(self, actions):
        collectors.append(threading.current_thread().name)
        return step(self, actions)

    before = child_processes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matrix_game_v0.MatrixGameEnv, "step", recording_step)
        with pytest.warns(UserWarning, match="unknown env id 'actor_test_only_here'.*cannot import.*functools.partial"
                          ".*collecting on a thread instead"):
            fallback = run_with(config, tmp_path / "fallback", in_process=True)
    assert fallback.actor_startup_s is None and any(name.startswith("semzoo-acting") for name in collectors)
    assert child_processes() == before
    run_with(config, tmp_path / "thread", in_process=False)
    assert metric_rows(tmp_path / "fallback") == metric_rows(tmp_path / "thread")


def test_an_actor_process_that_dies_while_starting_falls_back_to_the_thread(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.executable", "/bin/false")  # the child exits at once, saying nothing
    config = golden_config("matrix:two_step", "qmix", tmp_path)
    with pytest.warns(UserWarning, match=r"died \(exit code 1\).*collecting on a thread instead"):
        fallback = run_with(config, tmp_path / "fallback", in_process=True)
    assert fallback.actor_startup_s is None
    run_with(config, tmp_path / "thread", in_process=False)
    assert metric_rows(tmp_path / "fallback") == metric_rows(tmp_path / "thread")


def test_an_actor_process_dead_before_it_is_sent_its_config_falls_back_to_the_thread(tmp_path, monkeypatch):
    """The child exiting before the parent writes to it (EPIPE on a loaded machine) is a start failure too."""
    started = subprocess.Popen

    def start_and_wait_for_exit(*args, **kwargs):
        process = started(*args, **kwargs)
        process.wait()
        return process

    monkeypatch.setattr("sys.executable", "/bin/false")
    monkeypatch.setattr("semzoo.run.actor.subprocess.Popen", start_and_wait_for_exit)
    config = golden_config("matrix:two_step", "qmix", tmp_path)
    with pytest.warns(UserWarning, match=r"died \(exit code 1\).*collecting on a thread instead"):
        fallback = run_with(config, tmp_path / "fallback", in_process=True)
    assert fallback.actor_startup_s is None
