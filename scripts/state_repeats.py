"""Where a run's repeated states come from: its own episode, or other episodes.

SEM's key is the float32 bits of a random projection of the state, so two steps share an entry exactly when their
states are equal (two different states meet only by a float32 coincidence of all the projection's values). The
table's ``memory_merge_rate`` counts every write that met an entry, and its cross-hit rate every lookup answered by
an entry of more than one visit: both count a state that recurs within one episode (a state the episode returns
to, or one a step leaves unchanged) the same as a state that another episode reached. Only the second can
bring another episode's return into a target.

For each run directory this reads the replay buffer of its newest checkpoint (the last ``buffer_size`` episodes,
packed) and sorts every step's state (s_t, t < the episode's length: the states the table is written with) into:

- ``unique``: no other step of the buffer has it;
- ``own episode``: it recurs, but only within its own episode;
- ``other episodes``: another episode of the buffer has it too (the steps whose entry can carry another return).

It also gives the share of steps whose state equals the step before's (the env did not change the state), the
share of distinct states held by more than one episode, and the merge rate the table would show on these steps
alone ((steps - distinct states) / steps; the run's own rate counts the whole run). Any run with a checkpoint
will do, with a memory or not: the states are the env's.

    python scripts/state_repeats.py runs/sparse/smax_3m_reward=deaths_sem-qmix_seed0 [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semzoo.run.checkpoint import CheckpointManager


@dataclass(frozen=True)
class Repeats:
    """The steps of a buffer, sorted by where their state recurs (shares of ``steps``)."""

    episodes: int
    steps: int
    unique: float
    own_episode: float
    other_episodes: float
    same_as_previous: float
    """Steps t >= 1 whose state equals the state of step t - 1, over all steps."""
    merge_rate: float
    """(steps - distinct states) / steps: the merge rate of a table written with these steps alone."""
    shared_states: float
    """Distinct states that more than one episode holds, over distinct states."""


def step_states(length: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps of a packed buffer (each episode's ``length + 1`` states one after another): their states [K, F]
    and episode index [K], the state after the last step left out."""
    length = np.asarray(length, np.int64)
    if length.ndim != 1 or (length < 0).any():
        raise ValueError(f"length has shape {length.shape} or negative entries; expected one length >= 0 an episode")
    if state.ndim != 2 or state.shape[0] != int((length + 1).sum()):
        raise ValueError(f"state has shape {tuple(state.shape)}, expected [sum(length + 1) = "
                         f"{int((length + 1).sum())}, F] (a packed buffer)")
    episode = np.repeat(np.arange(length.size), length + 1)
    start = np.r_[0, np.cumsum(length + 1)[:-1]]
    time = np.arange(state.shape[0]) - np.repeat(start, length + 1)
    step = time < np.repeat(length, length + 1)
    return state[step], episode[step]


def classify(length: np.ndarray, state: np.ndarray) -> Repeats:
    """Sort the steps of a packed buffer by where their state recurs."""
    states, episode = step_states(length, state)
    steps = states.shape[0]
    if steps == 0:
        raise ValueError("the buffer holds no steps")
    rows = np.ascontiguousarray(states.astype(np.float32)).view(np.dtype((np.void, states.shape[1] * 4))).ravel()
    _, state_id, count = np.unique(rows, return_inverse=True, return_counts=True)
    state_id = state_id.ravel()
    # episodes per distinct state: distinct (state, episode) pairs counted per state
    pairs = np.unique(np.stack([state_id, episode], axis=1), axis=0)
    episodes_per_state = np.bincount(pairs[:, 0], minlength=count.size)
    repeated = count[state_id] > 1
    other = episodes_per_state[state_id] > 1
    previous = np.zeros(steps, bool)  # consecutive steps of one episode are t - 1 and t
    previous[1:] = (state_id[1:] == state_id[:-1]) & (episode[1:] == episode[:-1])
    return Repeats(episodes=len(length), steps=steps, unique=float((~repeated).mean()),
                   own_episode=float((repeated & ~other).mean()), other_episodes=float(other.mean()),
                   same_as_previous=float(previous.mean()), merge_rate=float((steps - count.size) / steps),
                   shared_states=float((episodes_per_state > 1).mean()))


def run_repeats(run_dir: Path) -> tuple[int, Repeats]:
    """The env steps of the run's newest checkpoint and the repeats of its buffer."""
    latest = CheckpointManager(run_dir).load_latest()
    if latest is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint in {run_dir / 'checkpoints'} (train with "
                                "--keep-checkpoints 1 or more to keep one)")
    _, payload = latest
    buffer = payload["buffer"]
    if buffer.get("layout") != "packed":
        raise ValueError(f"{run_dir}: the checkpoint's buffer is not packed (a checkpoint from before semzoo 0.3)")
    length, state = buffer["length"].numpy(), buffer["state"].numpy()
    return int(payload["counters"]["env_steps"]), classify(length, state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories, each with a checkpoint")
    args = parser.parse_args(argv)
    print("| run | env steps | episodes | steps | unique | own episode only | other episodes | same as the step "
          "before | merge rate on the buffer | distinct states in >1 episode |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in args.runs:
        try:
            env_steps, r = run_repeats(run)
        except (FileNotFoundError, ValueError) as err:
            print(f"state_repeats: {err}", file=sys.stderr)
            return 1
        print(f"| {run.name} | {env_steps:,} | {r.episodes:,} | {r.steps:,} | {r.unique:.1%} | {r.own_episode:.1%} "
              f"| {r.other_episodes:.1%} | {r.same_as_previous:.1%} | {r.merge_rate:.1%} | {r.shared_states:.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
