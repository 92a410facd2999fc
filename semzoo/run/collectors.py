"""Where the training loop's episodes come from: one collector interface, two collectors.

The loop (``semzoo.run.trainer``) asks a collector for each batch of training episodes in two steps,
``submit(seed, epsilon)`` and ``result()``, and calls ``sync(agent)`` once the batch's updates are owed.
A collector's ``lag`` says where those updates fall:

- ``EpisodeCollector`` (lag 0, Algorithm 1 and PyMARL's episode runner): ``result()`` plays the batch with the
  learner's own agent and random generator; the loop then takes the batch's updates before the next submit.
- ``OverlappedCollector`` (lag 1): ``submit`` starts the batch on a copy of the agent, the acting agent, in the
  actor process (``semzoo.run.actor``) or, as its fallback, on a thread of this process; the loop takes the
  updates owed for the previous batch while it plays, and ``sync`` copies the learner's parameters into the
  acting agent afterwards. Batch k+1 is thus played with the parameters after the updates of batches 1..k-1.

The acting agent and its generator belong to the trainer (a checkpoint holds them); the collector only uses them.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.run.actor import ActorProcess
from semzoo.run.runner import EpisodeRunner, RolloutStats
from semzoo.types import EpisodeBatch

Collected = tuple[EpisodeBatch, RolloutStats, float]
"""A batch of training episodes, their statistics and the seconds the collection took."""


class Collector(Protocol):
    lag: int
    """Batches of updates the acting parameters trail the learner's by: 0, the batch's updates follow it before the
    next batch; 1, they run while the next batch is collected."""

    def submit(self, seed: int, epsilon: float) -> None:
        """Start the next batch of training episodes (env seed of its first episode, epsilon for all of them)."""

    def result(self) -> Collected:
        """The batch last submitted; re-raises an exception of the collection."""

    def sync(self, agent: torch.nn.Module) -> None:
        """The next batch acts with ``agent``'s parameters as they stand now."""

    def close(self) -> None:
        """Stop collecting (safe to call twice); a collection in flight is finished or ended."""


def play(runner: EpisodeRunner, generator: torch.Generator, seed: int, epsilon: float) -> Collected:
    """One batch of ``runner``'s N envs, epsilon-greedy with ``generator``, and the seconds it took."""
    started = time.perf_counter()
    batch, stats = runner.run(epsilon=epsilon, seed=seed, generator=generator)
    return batch, stats, time.perf_counter() - started


class EpisodeCollector:
    """The paper's collector: each batch played when asked for, by the learner's agent and generator."""

    lag = 0

    def __init__(self, runner: EpisodeRunner, generator: torch.Generator) -> None:
        self.runner, self.generator = runner, generator
        self._request: tuple[int, float] | None = None

    def submit(self, seed: int, epsilon: float) -> None:
        self._request = (seed, epsilon)

    def result(self) -> Collected:
        assert self._request is not None, "result() before submit()"
        (seed, epsilon), self._request = self._request, None
        return play(self.runner, self.generator, seed, epsilon)

    def sync(self, agent: torch.nn.Module) -> None:
        pass  # the runner acts with the learner's agent itself

    def close(self) -> None:
        pass


class OverlappedCollector:
    """Overlap mode's collector: the acting agent plays each batch in the actor process, or on a thread.

    ``actor`` is a started actor process (``semzoo.run.actor.start_or_fall_back``), or None to collect on a thread of
    this process with ``runner`` (built on the acting agent); either gives the same batches from the same parameters
    and generator state.
    """

    lag = 1

    def __init__(self, acting_agent: RNNAgent, generator: torch.Generator, *, runner: EpisodeRunner,
                 actor: ActorProcess | None) -> None:
        self.acting_agent, self.generator, self.runner, self.actor = acting_agent, generator, runner, actor
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semzoo-acting") if actor is None else None
        self._in_flight: Future[Collected] | None = None

    def submit(self, seed: int, epsilon: float) -> None:
        if self.actor is not None:
            self.actor.submit(seed, epsilon, self.acting_agent.state_dict(), self.generator.get_state())
        else:
            assert self._thread is not None
            self._in_flight = self._thread.submit(play, self.runner, self.generator, seed, epsilon)

    def result(self) -> Collected:
        if self.actor is not None:
            batch, stats, generator_state, seconds = self.actor.result()  # re-raises the child's exception
            self.generator.set_state(generator_state)
            return batch, stats, seconds
        assert self._in_flight is not None, "result() before submit()"
        in_flight, self._in_flight = self._in_flight, None
        return in_flight.result()  # re-raises the thread's exception

    def sync(self, agent: torch.nn.Module) -> None:
        self.acting_agent.load_state_dict(agent.state_dict())

    def close(self) -> None:
        if self.actor is not None:
            self.actor.close()  # terminates a request in flight
        if self._thread is not None:
            self._thread.shutdown(wait=True)  # a collection in flight finishes first


__all__ = ["Collected", "Collector", "EpisodeCollector", "OverlappedCollector", "play"]
