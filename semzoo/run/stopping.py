"""Stopping a run on a signal without losing its progress: checkpoint at the end of the iteration, then stop.

A long run is stopped by Ctrl-C (SIGINT) or by a scheduler's SIGTERM (SLURM and Kubernetes send it, then
SIGKILL after a grace period). Without care either loses everything since the last periodic checkpoint
(up to ``save_interval`` env steps). While a run trains (``Trainer.run``, ``MultiTrainer.run``), the first
such signal only asks it to stop: at the end of the current iteration, with nothing in flight, the run
writes a checkpoint of that iteration (every run of a group, together) and raises ``RunStopped``. The
checkpoint is one of the run's ordinary checkpoints, so ``semzoo train --resume`` continues the run bit for
bit: the resumed run is the run that was never stopped (it keeps the periodic checkpoints' schedule too). A
second signal stops at once with ``KeyboardInterrupt``, as an unhandled Ctrl-C does, for an iteration
that takes too long.

Handlers are installed only in the main thread (Python's rule; a run driven from another thread keeps
the default behaviour) and the previous handlers come back when the run returns.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a training run to checkpoint and stop."""


def signal_exit_code(signum: int) -> int:
    """The shell's exit status for death by signal ``signum`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


class RunStopped(KeyboardInterrupt):
    """A run stopped on a signal after checkpointing its last iteration; continue it with ``--resume``.

    A ``KeyboardInterrupt``, so code that does not know about it stops as on Ctrl-C (and Ray does not
    retry it as a failed task). ``exit_code`` is the shell's convention for death by that signal.
    """

    def __init__(self, signum: int, stopped: Sequence[tuple[Path | None, int]]) -> None:
        """``stopped``: (run directory or None without one, env steps) of each run that stopped."""
        self.signum = signum
        self.run_dirs = [run_dir for run_dir, _ in stopped if run_dir is not None]
        self.env_steps = [steps for _, steps in stopped]
        name = signal.Signals(signum).name
        if self.run_dirs:
            where = ", ".join(f"{d} at {s:,} env steps" for d, s in stopped if d is not None)
            from semzoo.runfiles import plugin_flags, run_plugins

            resume = " ".join(f"--resume {d}" for d in self.run_dirs)
            plugins = plugin_flags([plugin for d in self.run_dirs for plugin in run_plugins(d).values()])
            message = (f"stopped by {name}; checkpoint saved for {where}: continue with "
                       f"`semzoo {plugins}train {resume}`")
        else:
            steps = ", ".join(f"{s:,}" for s in self.env_steps)
            message = f"stopped by {name} at {steps} env steps (no run directory: nothing saved)"
        super().__init__(message)

    @property
    def exit_code(self) -> int:
        return signal_exit_code(self.signum)


class StopRequest:
    """The first stop signal received while active (``signum``), or None."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: stopped without a checkpoint")
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While the block runs, the first SIGINT/SIGTERM sets ``request.signum``; a second raises KeyboardInterrupt.

    Outside the main thread nothing is installed and ``request.signum`` stays None.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, request._handle)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


__all__ = ["STOP_SIGNALS", "RunStopped", "StopRequest", "signal_exit_code", "stop_on_signals"]
