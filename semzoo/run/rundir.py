"""The run directory as training writes it: one folder per run, held by one process (``RunLock``), with its
metrics writer, checkpoints, best agent and final record. Its layout, and the readers the analysis of finished
runs shares, are in ``semzoo.runfiles``.

Resuming cuts metrics.csv back to the size recorded in the checkpoint, so no row is written twice."""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import importlib.util
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from semzoo.config import TrainConfig, is_smax
from semzoo.run.checkpoint import (
    CHECKPOINT_DIR,
    CheckpointError,
    CheckpointManager,
    load_checkpoint,
    save_checkpoint,
    write_atomic,
)
from semzoo.run.provenance import write_provenance
from semzoo.runfiles import (
    BEST_FILE,
    CONFIG_FILE,
    FINAL_FILE,
    LOCK_FILE,
    METRIC_FIELDS,
    METRICS_FILE,
    PLUGINS_FILE,
    TENSORBOARD_DIR,
    read_run_config,
    stored_config_dict,
)

RESUME_IGNORED_FIELDS = frozenset({"steps", "keep_checkpoints", "out", "run_name", "device"})
"""Config fields a resumed run may change: the others must match the checkpoint's."""


def load_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config stored in a run directory, its algorithm id judged by the algorithm table (a plugin's
    id needs its plugin); ValueError naming the problem otherwise."""
    from semzoo.algos import parse_algorithm

    config = read_run_config(run_dir)
    try:
        parse_algorithm(config.algo)
    except ValueError as err:
        raise ValueError(f"{Path(run_dir) / CONFIG_FILE} is not a valid semzoo config: {str(err).splitlines()[0]}") from None
    return config

class RunLockedError(ValueError):
    """Another process is writing this run directory."""


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/.lock`` held while a process writes the run.

    The kernel drops the lock when the process exits, however it exits (SIGKILL included), so a
    killed run never leaves its directory locked. ``flock`` is advisory and per host: on a shared
    filesystem across nodes (a Ray cluster) it protects against writers on the same node only.
    """

    def __init__(self, run_dir: Path) -> None:
        import fcntl

        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot create run directory {run_dir}: {err.strerror or err} (is --out a file, or not "
                             "writable?): choose another --out") from None
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(self._fd)
            self._fd = None
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunLockedError(f"run directory {run_dir} is in use by another semzoo process: wait for it to "
                                     "finish (or stop it), or choose another --out/--run-name") from None
            raise
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


class MetricsLogger:
    """Appends (env_steps, episodes, updates, wall_time, name, value) rows to ``metrics.csv``.

    ``fresh=True`` starts the file over; otherwise rows are appended (a resumed run first cuts the
    file back to the size recorded in its checkpoint, so no row is written twice).
    """

    def __init__(self, path: Path, *, fresh: bool = True) -> None:
        self.path = path
        new = fresh or not path.exists() or path.stat().st_size == 0
        self._file = path.open("w" if new else "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(METRIC_FIELDS)
            self._file.flush()
        self.extra_sinks: list[Callable[[str, float, int], None]] = []
        self._tensorboard: Any = None

    def add_tensorboard(self, log_dir: Path, *, purge_step: int | None) -> None:
        """Also write every row as TensorBoard events (the names of metrics.csv, indexed by env steps).

        ``purge_step``: a resumed run drops the events a killed run wrote past its checkpoint.
        """
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)
        self._tensorboard = writer
        self.extra_sinks.append(lambda name, value, step: writer.add_scalar(name, value, step))

    def log(self, metrics: dict[str, float], *, env_steps: int, episodes: int, updates: int, wall_time: float) -> None:
        for name, value in metrics.items():
            self._writer.writerow([env_steps, episodes, updates, f"{wall_time:.3f}", name, repr(float(value))])
            for sink in self.extra_sinks:
                sink(name, float(value), env_steps)
        self._file.flush()

    def nbytes(self) -> int:
        """Size of the file with every row logged so far (the resume point recorded in checkpoints)."""
        self._file.flush()
        return os.fstat(self._file.fileno()).st_size

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None


def truncate_metrics(run_dir: str | Path, nbytes: int) -> None:
    """Cut a run's metrics.csv back to ``nbytes`` (rows written after a checkpoint, or a half-written row)."""
    path = Path(run_dir) / METRICS_FILE
    if path.exists() and path.stat().st_size > nbytes:
        with path.open("r+b") as f:
            f.truncate(nbytes)


def check_checkpoint_matches(payload: dict[str, Any], config: TrainConfig, where: Path) -> None:
    """Refuse a checkpoint written by a run of another env, algorithm or configuration."""
    if (payload.get("env"), payload.get("algo")) != (config.env, config.algo):
        raise CheckpointError(
            f"checkpoint {where} belongs to env {payload.get('env')!r} with algo {payload.get('algo')!r}, but the run "
            f"is env {config.env!r} with algo {config.algo!r}: use the run directory the checkpoint came from"
        )
    saved, current = stored_config_dict(payload.get("config", {})), config.to_dict()
    # resolved as config.json is: a section or field the checkpoint predates takes its default there too; a config
    # this semzoo cannot build stays as written, so the comparison below names the difference
    with contextlib.suppress(TypeError, ValueError):
        saved = TrainConfig.from_dict(saved).to_dict()
    differ = sorted(k for k in set(saved) | set(current) if k not in RESUME_IGNORED_FIELDS and saved.get(k) != current.get(k))
    if differ:
        raise CheckpointError(f"checkpoint {where} was written with other values of {differ} than {CONFIG_FILE} holds: "
                              "restore the run's config.json or start a new run")


def missing_checkpoints(run_dir: Path, config: TrainConfig) -> str:
    """'no checkpoint files in <run>/checkpoints' and, where the run's config says why, the reason
    (``keep_checkpoints=0`` removes them when a run finishes); no cause is guessed."""
    text = f"no checkpoint files in {run_dir / CHECKPOINT_DIR}"
    if config.keep_checkpoints == 0 and (run_dir / FINAL_FILE).exists():
        text += " (it ran with keep_checkpoints=0, which removes them when the run finishes)"
    return text


def load_trained(run_dir: str | Path, *, purpose: str) -> tuple[TrainConfig, dict[str, Any]]:
    """(config, payload of the last valid checkpoint) of a run, checked to belong together.

    ``purpose`` completes the error for a run without checkpoints ("to evaluate", "to load a policy from").
    """
    config = load_run_config(run_dir)
    found = CheckpointManager(Path(run_dir)).load_latest()
    if found is None:
        left = (f"evaluate its best agent with `semzoo evaluate --best {run_dir}`, or read"
                if (Path(run_dir) / BEST_FILE).exists() else f"it has no {BEST_FILE} either: read")
        raise CheckpointError(f"{run_dir} has no checkpoint {purpose}: {missing_checkpoints(Path(run_dir), config)}; "
                              f"{left} its logged scores with `semzoo table {run_dir}`")
    path, payload = found
    check_checkpoint_matches(payload, config, path)
    return config, payload


def write_best(run_dir: Path, payload: dict[str, Any] | None) -> None:
    """Write ``best.ckpt`` atomically (a checkpoint file), or remove it when ``payload`` is None (no best yet)."""
    if payload is None:
        (run_dir / BEST_FILE).unlink(missing_ok=True)
    else:
        save_checkpoint(run_dir / BEST_FILE, payload)


def load_best(run_dir: str | Path) -> tuple[TrainConfig, dict[str, Any]]:
    """(config, payload of ``best.ckpt``) of a run, checked to belong together; ValueError naming the fix otherwise."""
    config = load_run_config(run_dir)
    path = Path(run_dir) / BEST_FILE
    if not path.exists():
        if CheckpointManager(Path(run_dir)).paths():
            left = f"evaluate its last checkpoint with `semzoo evaluate {run_dir}`"
        else:
            left = (f"it has no checkpoint either ({missing_checkpoints(Path(run_dir), config)}): read its logged "
                    f"scores with `semzoo table {run_dir}`, or train it again")
        raise CheckpointError(f"run {run_dir} has no {BEST_FILE} (a run writes it at its first test evaluation); "
                              f"{left}")
    payload = load_checkpoint(path)
    check_checkpoint_matches(payload, config, path)
    return config, payload


LAST_ROW_BYTES = 4096
"""How much of the end of metrics.csv ``logged_steps`` reads: many times the longest row."""


def logged_steps(run_dir: str | Path) -> int:
    """Env steps of the last complete row of a run's metrics.csv (0 without one); reads only the file's end."""
    try:
        with (Path(run_dir) / METRICS_FILE).open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LAST_ROW_BYTES))
            tail = f.read()
    except OSError:
        return 0
    for line in reversed(tail.split(b"\n")[:-1]):  # the part after the last newline may be half-written
        first = line.split(b",", 1)[0]
        if first.isdigit():
            return int(first)
    return 0


def run_finished(run_dir: str | Path, steps: int | None = None) -> bool:
    """True when the run in ``run_dir`` completed (``final.json``), to ``steps`` env steps if given."""
    path = Path(run_dir) / FINAL_FILE
    try:
        final = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return steps is None or int(final.get("env_steps", -1)) >= steps


def write_final(run_dir: Path, final: dict[str, Any]) -> None:
    """Mark the run finished: ``final.json`` with its counters and last evaluation."""
    write_atomic(run_dir / FINAL_FILE, json.dumps(final, indent=2).encode())


RUN_NAME_ENV_ARGS_CHARS = 80
"""The longest env-argument part of a default run name; a longer one is cut and ends with a hash of them all."""
REPEAT_SUFFIX = "_run"
"""A default name already holding a run gets ``_run2``, ``_run3`` ...: a suffix no one reads as a seed range."""


def _folder_safe(text: str) -> str:
    """``text`` with each run of characters unsafe in a folder name (all but letters, digits and ``-_.=``) as one _."""
    out: list[str] = []
    for ch in text:
        safe = ch if ch.isalnum() or ch in "-_.=" else "_"
        if not (safe == "_" and out and out[-1] == "_"):
            out.append(safe)
    return "".join(out)


def _compact_json(value: Any) -> str:
    """``value`` as compact JSON without brackets, braces or quotes: ``[[5, 0], [0, 3]]`` -> ``5,0,0,3``."""
    return "".join(ch for ch in json.dumps(value, separators=(",", ":")) if ch not in '[]{}"')


def run_name_env_args(config: TrainConfig) -> list[str]:
    """The env arguments a default run name shows, ``key=value`` sorted by key (``['fixed_starts=true']``): all the
    run's but the SMAX profile its map gets by default (``semzoo.resolution.with_env_profile``), which every run on
    the map has; each made folder-safe, and cut with a hash past ``RUN_NAME_ENV_ARGS_CHARS`` characters in all."""
    args = dict(config.env_args)
    if is_smax(config.env) and "profile" in args:
        from semzoo.envs.smac_rules import default_profile

        if args["profile"] == default_profile(config.env.partition(":")[2]):
            del args["profile"]
    texts = [_folder_safe(f"{key}={_compact_json(value)}").strip("_") for key, value in sorted(args.items())]
    if len("_".join(texts)) <= RUN_NAME_ENV_ARGS_CHARS:
        return texts
    digest = hashlib.sha1(json.dumps(args, sort_keys=True).encode()).hexdigest()[:8]
    return ["_".join(texts)[:RUN_NAME_ENV_ARGS_CHARS - len(digest) - 1].rstrip("_") + "_" + digest]


def default_run_name(config: TrainConfig, variant: Sequence[str] = ()) -> str:
    """<env>_<algo>_seed<seed>, with characters unsafe in a folder name replaced by _; the env arguments the run
    was given (``run_name_env_args``) come after the algorithm, and a sweep's grid puts the settings it varies
    (``setting_text``, those off the defaults) after them: ``matrix_custom_qmix_payoff=5_0_0_3_seed0``,
    ``smax_2s3z_sem-qmix_lam=0.3_seed0``."""
    safe_env = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in config.env)
    return "_".join([safe_env, config.algo, *run_name_env_args(config), *variant, f"seed{config.seed}"])


def new_run_dir(config: TrainConfig) -> Path:
    """Where a new run of ``config`` goes: ``<out>/<run_name>``.

    Without a ``run_name`` the default name ``<env>_<algo>[_<env args>]_seed<seed>`` gets ``_run2``, ``_run3`` ...
    when a run is already there, so the same command can be run again (the README's main job); an explicit
    ``run_name`` is taken as given (and refused later if it already holds a run).
    """
    out = Path(config.out)
    if config.run_name:
        return out / config.run_name
    name = default_run_name(config)
    candidate, n = out / name, 1
    while (candidate / CONFIG_FILE).exists():
        n += 1
        candidate = out / f"{name}{REPEAT_SUFFIX}{n}"
    return candidate


def open_run_dir(run_dir: Path, config: TrainConfig, best: dict[str, Any] | None, *, resumed: bool, env_steps: int,
                 tensorboard: bool, device: torch.device) -> MetricsLogger:
    """Write a run's config.json, a new run's ``provenance.json`` (a resumed run's session is added by
    ``record_session`` once it starts training, so a resume that fails before adds none) and ``best.ckpt`` as of
    ``best`` (a resumed run's checkpoint may be older than the file a killed run left), remove ``final.json``, and open
    metrics.csv (appended to when ``resumed``) with its TensorBoard events when ``tensorboard`` is installed and asked
    for."""
    write_atomic(run_dir / CONFIG_FILE, json.dumps(config.to_dict(), indent=2).encode())
    if not resumed:
        write_provenance(run_dir, device, resumed=False, env_steps=env_steps)
        write_plugins(run_dir, config)
    (run_dir / FINAL_FILE).unlink(missing_ok=True)
    write_best(run_dir, best)
    logger = MetricsLogger(run_dir / METRICS_FILE, fresh=not resumed)
    if tensorboard and importlib.util.find_spec("tensorboard") is not None:
        logger.add_tensorboard(run_dir / TENSORBOARD_DIR, purge_step=env_steps + 1 if resumed else None)
    return logger


def plugin_parts(config: TrainConfig) -> dict[str, str]:
    """The run's parts that a plugin registered, part -> the plugin as given to --plugin (``plugins.plugin_of``):
    its memory, mixer, algorithm row and env."""
    from semzoo.algos import parse_algorithm
    from semzoo.plugins import plugin_of

    algo = parse_algorithm(config.algo)
    parts = {"memory": ("memory", algo.memory), "mixer": ("mixer", algo.mixer),
             "algorithm": ("algorithm", algo.algorithm.name), "env": ("env", config.env)}
    return {part: plugin for part, (kind, name) in parts.items() if (plugin := plugin_of(kind, name)) is not None}


def write_plugins(run_dir: Path, config: TrainConfig) -> None:
    """Write ``PLUGINS_FILE`` for a new run that uses a plugin's part (nothing otherwise)."""
    parts = plugin_parts(config)
    if parts:
        write_atomic(run_dir / PLUGINS_FILE, json.dumps({"components": parts}, indent=2).encode())


def record_session(run_dir: Path, device: torch.device, env_steps: int) -> None:
    """Add this session's record to a resumed run's ``provenance.json``: called when the run starts training."""
    write_provenance(run_dir, device, resumed=True, env_steps=env_steps)


def resume_point(run_dir: Path, config: TrainConfig) -> tuple[RunLock, dict[str, Any] | None]:
    """The lock of a run about to be continued with ``config``, and its last valid checkpoint (None: start over).

    Takes the lock before anything is read or cut back; removes half-written checkpoints and sets corrupt ones
    aside; cuts metrics.csv back to the checkpoint. With no checkpoint at all (killed before the first save) the
    run starts over with a warning; a run that finished with ``keep_checkpoints=0`` has none left and is refused
    (ValueError), as is a checkpoint of another run or one past ``config.steps``.
    """
    lock = RunLock(run_dir)  # before anything is read or cut back
    try:
        manager = CheckpointManager(run_dir)
        manager.clean_temporaries()
        found = manager.load_latest(quarantine=True)
        if found is None and (run_dir / FINAL_FILE).exists():
            best = (f"; its best agent is still in {BEST_FILE} (`semzoo evaluate --best {run_dir}`)"
                    if (run_dir / BEST_FILE).exists() else "")
            raise ValueError(f"{run_dir} finished and cannot be continued: {missing_checkpoints(run_dir, config)}; "
                             f"train a new run with more --steps{best}")
        if found is None:
            warnings.warn(f"{run_dir} has no checkpoint yet: starting the run from step 0", stacklevel=3)
            return lock, None
        path, payload = found
        check_checkpoint_matches(payload, config, path)
        done = int(payload["counters"]["env_steps"])
        if config.steps < done:
            raise ValueError(f"steps={config.steps} is fewer than the {done} env steps the checkpoint {path.name} "
                             f"already holds: pass --steps {done} or more")
        truncate_metrics(run_dir, int(payload["metrics_bytes"]))
    except BaseException:
        lock.release()
        raise
    return lock, payload
