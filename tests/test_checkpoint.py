"""Checkpoints: atomic and checksummed files, fallback to the previous one, and exact resume."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from semzoo.config import AgentConfig, LearnerConfig, MemoryConfig, TrainConfig
from semzoo.run.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointWarning,
    load_checkpoint,
    save_checkpoint,
)
from semzoo.run.rundir import run_finished
from semzoo.run.trainer import Trainer, resume, train
from semzoo.runfiles import TIMING_METRICS, read_metrics

MPE = "pz:mpe2.simple_spread_v3:parallel_env"


def assert_same(a, b, path="payload"):
    """Bitwise equality of nested dicts/lists of tensors, arrays and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_checkpoint_round_trip_keeps_tensors_arrays_and_plain_values(tmp_path):
    payload = {"t": torch.arange(6).reshape(2, 3), "keys": np.arange(8, dtype=np.uint32).reshape(4, 2),
               "meta": np.array([1, 2], np.int64), "rng": (3, (1, 2, 3), None), "x": 1.5, "s": "qmix",
               "scalar": np.float32(2.0), "nested": [{"a": np.zeros(0, np.float32)}]}
    path = tmp_path / "c.ckpt"
    size = save_checkpoint(path, payload)
    assert path.stat().st_size == size
    loaded = load_checkpoint(path)
    assert loaded["keys"].dtype == np.uint32 and np.array_equal(loaded["keys"], payload["keys"])
    assert torch.equal(loaded["t"], payload["t"]) and loaded["rng"] == (3, (1, 2, 3), None)
    assert loaded["scalar"] == 2.0 and loaded["nested"][0]["a"].shape == (0,)


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "garbage", "header_format", "header_size"])
def test_damaged_checkpoint_is_detected(tmp_path, damage):
    path = tmp_path / "c.ckpt"
    save_checkpoint(path, {"w": torch.randn(100)})
    raw = path.read_bytes()
    magic, version, checksum, rest = raw.split(b" ", 3)
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip_byte":
        path.write_bytes(raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:])
    elif damage == "header_format":
        path.write_bytes(b" ".join([magic, b"x" * len(version), checksum, rest]))
    elif damage == "header_size":
        path.write_bytes(b" ".join([magic, version, checksum, b"#" + rest[1:]]))
    else:
        path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match=f"checkpoint {path} is corrupt"):
        load_checkpoint(path)


def test_manager_keeps_the_last_two_and_falls_back_past_a_corrupt_one(tmp_path):
    manager = CheckpointManager(tmp_path)
    for steps in (100, 200, 300):
        manager.save({"steps": steps}, steps)
    assert [p.name for p in manager.paths()] == ["step_000000000300.ckpt", "step_000000000200.ckpt"]
    newest = manager.paths()[0]
    newest.write_bytes(newest.read_bytes()[:-3])  # a torn write the checksum must catch
    with pytest.warns(CheckpointWarning, match="using the earlier step_000000000200.ckpt"):
        path, payload = manager.load_latest(quarantine=True)
    assert payload["steps"] == 200 and path.name == "step_000000000200.ckpt"
    assert (tmp_path / "checkpoints" / "step_000000000300.ckpt.corrupt").exists()


def test_corrupt_checkpoint_with_no_earlier_one_is_an_error(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save({"steps": 1}, 1)
    manager.paths()[0].write_bytes(b"SEMZOO-CKPT 1 00 5\nhello")
    with pytest.raises(CheckpointError, match="no earlier valid checkpoint"):
        manager.load_latest()


def test_a_writer_killed_mid_write_leaves_only_a_temporary_file(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save({"steps": 10}, 10)
    leftover = manager.folder / ".step_000000000020.ckpt.999.tmp"
    leftover.write_bytes(b"SEMZOO-CKPT 1 half")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no corrupt-file warning: the temporary is never read
        _, payload = manager.load_latest()
    assert payload["steps"] == 10
    manager.clean_temporaries()
    assert not leftover.exists()


def tiny_config(out, *, steps: int, algo: str = "sem-qmix", sequential: bool = False) -> TrainConfig:
    """MPE episodes of 5 steps, 2 envs: 10 env steps per iteration; the replay buffer wraps, the table updates."""
    return TrainConfig(env=MPE, env_args={"max_cycles": 5}, algo=algo, steps=steps, n_envs=2, out=str(out),
                       sequential=sequential,
                       run_name="run", test_interval=60, test_episodes=3, log_interval=30, save_interval=50,
                       agent=AgentConfig(hidden_dim=16), memory=MemoryConfig(pending_size=30, capacity=500),
                       learner=LearnerConfig(batch_size=4, buffer_size=16, target_update_episodes=10))


def comparable_rows(run_dir):
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in read_metrics(run_dir)
            if r["name"] not in TIMING_METRICS]


def assert_cli_resume_is_exact(train_cli, out, flags, *, steps: int, stop_at: int, logs: tuple[str, ...] = (),
                               stopped=None):
    """`train` straight to ``steps`` and to ``stop_at`` then `--resume` to ``steps``, through ``train_cli(*args)``:
    the same metric rows (naming each of ``logs``) and the same final checkpoint (memory, learner, buffer, RNG).

    ``stopped(state)`` may check the checkpoint of the stopped run. Returns the straight run's final state.
    """
    train_cli(*flags, "--out", str(out), "--steps", str(steps), "--run-name", "straight")
    train_cli(*flags, "--out", str(out), "--steps", str(stop_at), "--run-name", "split")
    if stopped is not None:
        stopped(CheckpointManager(out / "split").load_latest()[1])
    train_cli("--resume", str(out / "split"), "--steps", str(steps), "--no-tensorboard")
    rows = comparable_rows(out / "straight")
    assert all(any(r["name"] == name for r in rows) for name in logs), [n for n in logs if n not in {r["name"] for r in rows}]
    assert rows == comparable_rows(out / "split")
    _, a = CheckpointManager(out / "straight").load_latest()
    _, b = CheckpointManager(out / "split").load_latest()
    for key in ("memory", "learner", "buffer", "rng"):
        assert_same(a[key], b[key], key)
    return a


RESUMED_PARTS = ("learner", "buffer", "memory", "rng", "loop", "counters", "best")
"""The parts of a checkpoint that a resumed run must end with exactly as the straight run (and ``acting``)."""


def straight_and_resumed(tmp_path, *, sequential: bool, total: int = 200):
    """Train to ``total`` env steps straight, and to half of it then resumed: both final checkpoints and row lists."""
    straight_dir, _ = train(tiny_config(tmp_path / "straight", steps=total, sequential=sequential), tensorboard=False)
    half_dir, _ = train(tiny_config(tmp_path / "split", steps=total // 2, sequential=sequential), tensorboard=False)
    assert run_finished(half_dir, total // 2) and not run_finished(half_dir, total)
    resume(half_dir, steps=total, tensorboard=False)
    assert run_finished(half_dir, total)
    _, straight = CheckpointManager(straight_dir).load_latest()
    _, split = CheckpointManager(half_dir).load_latest()
    for state in (straight, split):
        state["counters"].pop("wall_time")
    return straight, split, comparable_rows(straight_dir), comparable_rows(half_dir)


def resume_differences(straight, split, straight_rows, split_rows) -> list[str]:
    """The checkpoint parts (and ``metric rows``) in which a resumed run differs from the straight run."""
    differ = []
    for key in (*RESUMED_PARTS, *(("acting",) if "acting" in straight else ())):
        try:
            assert_same(straight[key], split[key], key)
        except AssertionError:
            differ.append(key)
    return differ + (["metric rows"] if straight_rows != split_rows else [])


@pytest.mark.parametrize("sequential", [False, True], ids=["overlapped", "sequential"])
def test_resume_is_bitwise_identical_to_a_straight_run(tmp_path, sequential):
    pytest.importorskip("mpe2")
    straight, split, straight_rows, split_rows = straight_and_resumed(tmp_path, sequential=sequential)
    assert straight["counters"]["env_steps"] == 200 and straight["counters"]["updates"] > 0
    assert straight["memory"]["n_entries"] > 0 and straight["buffer"]["size"] == 16
    assert ("acting" in straight) is not sequential  # overlap mode saves the acting agent's parameters
    differ = resume_differences(straight, split, straight_rows, split_rows)
    assert not differ, f"the resumed run ends other than the straight run in: {', '.join(differ)}"
    assert len(straight_rows) > 50


def _forget_sampling_generator(trainer, load, state):
    load(trainer, state)
    trainer.generator.manual_seed(trainer.config.seed)  # as a fresh run's: the replay samples start over


def _forget_episodic_table(trainer, load, state):
    empty = trainer.memory.state_dict()  # the fresh run's table, before the checkpoint is read
    load(trainer, state)
    trainer.memory.load_state_dict(empty)


def _forget_metric_window(trainer, load, state):
    load(trainer, state)
    trainer.window.updates, trainer.window.recent = {}, []  # the training metrics gathered since the last logged row


RESUME_CHANGES = {
    "replay sampling generator not restored": _forget_sampling_generator,
    "episodic table not restored": _forget_episodic_table,
    "training-metric window not restored": _forget_metric_window,
}
"""Pieces of state a change could forget to save or restore, each planted in ``Trainer.load_state_dict``
(``plant(trainer, the real load, state)``): the exact resume check must notice each."""


@pytest.mark.parametrize("change", list(RESUME_CHANGES))
def test_exact_resume_check_fails_on_state_left_out_of_a_resume(change, tmp_path, monkeypatch):
    pytest.importorskip("mpe2")
    plant, load = RESUME_CHANGES[change], Trainer.load_state_dict
    monkeypatch.setattr(Trainer, "load_state_dict", lambda trainer, state: plant(trainer, load, state))
    differ = resume_differences(*straight_and_resumed(tmp_path, sequential=True))
    assert differ, f"{change}: the resumed run is the straight run, the check did not notice"


def test_a_fresh_run_refuses_a_directory_that_holds_checkpoints(tmp_path):
    pytest.importorskip("mpe2")
    config = tiny_config(tmp_path, steps=20, sequential=True)
    train(config, tensorboard=False)
    with pytest.raises(ValueError, match="--resume"):
        Trainer(config, run_dir=tmp_path / "run")


def test_tensorboard_events_carry_the_metric_names(tmp_path):
    pytest.importorskip("mpe2")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = train(tiny_config(tmp_path, steps=60, algo="qmix", sequential=True))
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"loss", "return_mean", "test_return_mean", "steps_per_s"} <= tags
    assert tags == {r["name"] for r in read_metrics(run_dir)}


def test_a_checkpoint_older_than_a_config_section_still_matches_its_run(tmp_path):
    """A run saved by a semzoo without the curiosity/emc/emu sections (or a newer field) resumes and evaluates:
    the missing parts take their defaults, as they do when its config.json is read. A real difference is refused."""
    from semzoo.run.checkpoint import CheckpointError
    from semzoo.run.rundir import check_checkpoint_matches

    config = TrainConfig(env="matrix:two_step", algo="sem-qmix")
    older = {k: v for k, v in config.to_dict().items() if k not in ("curiosity", "emc", "emu")}
    older["memory"] = {k: v for k, v in older["memory"].items() if k != "miss_rule"}
    check_checkpoint_matches({"env": config.env, "algo": config.algo, "config": older}, config, tmp_path / "c.ckpt")
    changed = {**older, "memory": {**older["memory"], "lam": 0.5}}
    with pytest.raises(CheckpointError, match=r"other values of \['memory'\]"):
        check_checkpoint_matches({"env": config.env, "algo": config.algo, "config": changed}, config, tmp_path / "c.ckpt")


def test_a_checkpoint_streams_through_its_checksum_and_older_headers_still_load(tmp_path):
    """The payload is written as it is serialised, the header (its byte count zero-padded) last; a file with the
    unpadded header that earlier versions wrote loads the same."""
    import hashlib
    import io

    payload = {"w": torch.arange(1000, dtype=torch.float32), "keys": np.arange(6, dtype=np.uint32), "n": 3}
    path = tmp_path / "new.ckpt"
    size = save_checkpoint(path, payload)
    raw = path.read_bytes()
    header, _, body = raw.partition(b"\n")
    reference = io.BytesIO()
    torch.save({"w": payload["w"], "keys": {"__ndarray__": torch.from_numpy(payload["keys"]), "dtype": "<u4"}, "n": 3},
               reference)
    assert body == reference.getvalue() and size == len(raw)  # the bytes torch.save writes, streamed
    magic, version, checksum, count = header.split(b" ")
    assert (magic, version, len(count)) == (b"SEMZOO-CKPT", b"1", 20) and int(count) == len(body)
    assert checksum == hashlib.sha256(body).hexdigest().encode()
    old = tmp_path / "old.ckpt"
    old.write_bytes(b"SEMZOO-CKPT 1 %s %d\n" % (checksum, len(body)) + body)
    for loaded in (load_checkpoint(path), load_checkpoint(old)):
        assert torch.equal(loaded["w"], payload["w"]) and np.array_equal(loaded["keys"], payload["keys"])
        assert loaded["keys"].dtype == np.uint32 and loaded["n"] == 3
