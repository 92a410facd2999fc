"""Progress of long work on stderr: a run (``ConsoleProgress``) and a sweep (``SweepProgress``).

A run shows a rich bar on a terminal; otherwise (a log file, a pipe) plain lines, one about every 10 % of the
run and at least one every ``PLAIN_LINE_INTERVAL_S`` seconds, so that a long run's log shows it is alive. The first
iteration is not used for the rate: it holds one-off work (SMAX's JAX compilation takes tens of seconds), so
until a second iteration has finished the display says "warming up" instead of guessing an ETA from it.

A sweep's runs train in other processes (Ray workers, perhaps on other nodes), so its driver reads
their progress from their run directories: a line every ``interval_s`` with the runs finished, the env
steps logged across all runs, the rate since the sweep started and an ETA.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semzoo.config import is_smax
from semzoo.run.rundir import logged_steps

if TYPE_CHECKING:
    from semzoo.config import TrainConfig

BAR_WIDTH = 24
LINES_PER_RUN = 10
PLAIN_LINE_INTERVAL_S = 90.0
"""Without a terminal, the longest wait between a run's progress lines, in seconds (besides the line every 10 %)."""
SWEEP_PROGRESS_INTERVAL_S = 300.0
"""Seconds between a sweep's progress lines (a trial's metrics rows come every ``log_interval`` env steps)."""
SECONDS_PER_HOUR, SECONDS_PER_MINUTE = 3600, 60


def test_figure(info: dict[str, Any]) -> str:
    """The last evaluation as short text: win rate where the env reports wins, else return."""
    if "test_win_rate" in info:
        return f"test win rate {info['test_win_rate']:.2f}"
    if "test_return_mean" in info:
        return f"test return {info['test_return_mean']:.3f}"
    return ""


def one_off_work(config: TrainConfig) -> str:
    """What the first iteration of a run of ``config`` holds besides its steps, for the first progress line: the
    env's start, JAX's compilation on SMAX, and torch.compile where ``compile_update`` may apply (not on the CPU)."""
    parts = ["JAX compilation"] if is_smax(config.env) else []
    if config.compile_update and config.device != "cpu":
        parts.append("torch.compile")
    return ", ".join([*parts, "env start"])


class ConsoleProgress:
    """A ``Progress`` callback for ``Trainer``: env steps, steps/s, ETA and the last test figure.

    ``first_iteration``: the one-off work the first line names (``one_off_work``); ``interval_s`` (default
    ``PLAIN_LINE_INTERVAL_S``) and ``clock`` (seconds): the plain lines' timer, without a terminal.
    """

    def __init__(self, total: int, *, start: int = 0, label: str = "train", first_iteration: str = "env start",
                 interval_s: float | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.start, self.label, self.first_iteration = max(total, 1), start, label, first_iteration
        self.interval_s = PLAIN_LINE_INTERVAL_S if interval_s is None else interval_s
        self.clock = clock
        self.started = clock()
        self._warm: tuple[float, int] | None = None  # (time, steps) at the end of the first iteration
        self._next_line = start
        self._next_time = self.started
        self._bar: Any = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn(f"[bold]{label}"), BarColumn(bar_width=BAR_WIDTH),
                                 TextColumn("{task.completed:,}/{task.total:,} steps"), TextColumn("{task.fields[rate]}"),
                                 TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), TextColumn("{task.fields[test]}"),
                                 console=Console(stderr=True), transient=False)
            self._task = self._bar.add_task(label, total=self.total, completed=min(start, self.total),
                                            rate="warming up", eta="", test="")
            self._bar.start()

    def _rate_and_eta(self, steps: int) -> tuple[str, str]:
        now = self.clock()
        if self._warm is None:
            self._warm = (now, steps)
            return "warming up", f"first iteration {now - self.started:,.1f} s ({self.first_iteration})"
        t0, s0 = self._warm
        if steps <= s0 or now <= t0:
            return "warming up", ""
        rate = (steps - s0) / (now - t0)
        return f"{rate:,.0f} steps/s", f"ETA {max(self.total - steps, 0) / rate:,.0f} s"

    def __call__(self, info: dict[str, Any]) -> None:
        steps = info["env_steps"]
        rate, eta = self._rate_and_eta(steps)
        if self._bar is not None:
            self._bar.update(self._task, completed=min(steps, self.total), rate=rate, eta=eta, test=test_figure(info))
        elif steps >= self._next_line or self.clock() >= self._next_time:
            print(f"[{self.label}] {steps:,}/{self.total:,} steps  {rate}  {eta}  eps {info['epsilon']:.3f}  "
                  f"{test_figure(info)}".rstrip(), file=sys.stderr, flush=True)
            # the next line when 10 % of the run or interval_s has passed since this one, whichever comes first
            self._next_line = steps + self.total / LINES_PER_RUN
            self._next_time = self.clock() + self.interval_s

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def duration_text(seconds: float) -> str:
    """``3 h 05 min``, ``12 min``, ``40 s``."""
    if seconds >= SECONDS_PER_HOUR:
        hours, rest = divmod(round(seconds / SECONDS_PER_MINUTE), SECONDS_PER_MINUTE)
        return f"{hours} h {rest:02d} min"
    if seconds >= SECONDS_PER_MINUTE:
        return f"{round(seconds / SECONDS_PER_MINUTE)} min"
    return f"{seconds:.0f} s"


class SweepProgress:
    """Progress lines of a sweep, read from its runs' metrics.csv: ``runs``, (run directory, env steps to reach)."""

    def __init__(self, runs: Sequence[tuple[Path, int]], echo: Callable[[str], None], *,
                 interval_s: float = SWEEP_PROGRESS_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.runs, self.echo, self.interval_s, self.clock = list(runs), echo, interval_s, clock
        self.total = sum(steps for _, steps in self.runs)
        self.started, self.start_steps = clock(), self.done_steps()
        self._next = self.started + interval_s

    def done_steps(self) -> int:
        """Env steps the runs have logged, each counted up to its target."""
        return sum(min(steps, logged_steps(run_dir)) for run_dir, steps in self.runs)

    def line(self, finished: int) -> str:
        done, elapsed = self.done_steps(), self.clock() - self.started
        text = (f"sweep: {finished}/{len(self.runs)} runs done, {done:,}/{self.total:,} env steps "
                f"({100 * done / max(self.total, 1):.0f} %)")
        if done > self.start_steps and elapsed > 0:
            rate = (done - self.start_steps) / elapsed
            text += f", {rate:,.0f} env steps/s, ETA {duration_text((self.total - done) / rate)}"
        return text

    def __call__(self, finished: int) -> None:
        """Echo a line when ``interval_s`` has passed since the last one (``finished``: runs finished so far)."""
        if self.clock() >= self._next:
            self.echo(self.line(finished))
            self._next = self.clock() + self.interval_s
