"""Where a value-decomposition run's Q_tot stands against the returns its episodes reached, and what the mixer adds.

For each checkpoint of a run directory (or the newest only, ``--latest``) this rebuilds the run's networks and
replay buffer from the checkpoint (nothing is written to the run) and reads the ``--episodes`` newest stored
episodes (the epsilon-greedy episodes the learner trains on):

- ``Q_tot``: the online mixer's Q_tot(s_t, u_t) of the taken joint actions; ``y``: the learner's TD target;
- ``G``: the discounted return the episode actually reached from step t (sum_k gamma^k r_{t+k}, to its end);
- ``sum Q_a``: the agents' chosen utilities summed (VDN's Q_tot);
- for QMIX, the mixer's parts: ``V(s)`` (the state bias), the mixing part Q_tot - V(s), the gain
  sum_a dQ_tot/dQ_a (how much a change of every agent's utility moves Q_tot), and the mean absolute entries of the
  hypernetworks' outputs |W1(s)|, |w2(s)| and |b1(s)|;
- ``|s|max``: the largest state entry (what the hypernetworks are fed);
- by step of the episode: Q_tot, G, V(s) and the state's L2 norm averaged over steps 0-9, 10-19, ... and over the last step of
  episodes that ran to the limit (stored as terminal in the paper's runtime, while the state may carry no time).

``--fresh`` trains a short run first (``semzoo train`` with checkpoints every ``--every`` env steps), then reads it:

    python scripts/value_diagnose.py /tmp/lbf/runs/qmix-raw
    python scripts/value_diagnose.py --fresh --env lbf:Foraging-8x8-2p-2f-coop-v3 --algo qmix --steps 30000 \\
        --every 10000 --out /tmp/lbf/diag --env-arg state=scaled
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from semzoo.run.checkpoint import CheckpointManager, load_checkpoint
from semzoo.run.rundir import load_run_config
from semzoo.types import CleanBatch

BUCKET = 10
"""Steps of the episode averaged together in the by-step table."""


@dataclass(frozen=True)
class Diagnosis:
    """One checkpoint's values, each a mean over the real steps of the episodes read."""

    env_steps: int
    episodes: int
    q_tot: float
    target_y: float
    reached: float
    reached_max: float
    agent_sum: float
    state_max: float
    v: float | None
    mixing: float | None
    gain: float | None
    w1: float | None
    w2: float | None
    b1: float | None
    by_step: list[tuple[str, float, float, float | None, float]]
    """(steps, Q_tot, G, V(s), |s|) per bucket of steps, then the last step of episodes that ran to the limit; |s| is
    the state's mean L2 norm."""


def discounted_returns(reward_BT: torch.Tensor, mask_BT: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = sum_k gamma^k r_{t+k} over the real steps of each episode: [B,T] (zero on padding)."""
    out = torch.zeros_like(reward_BT)
    running = torch.zeros_like(reward_BT[:, 0])
    for t in range(reward_BT.shape[1] - 1, -1, -1):
        running = (reward_BT[:, t] + gamma * running) * mask_BT[:, t]
        out[:, t] = running
    return out


def _mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1.0))


def diagnose(payload: dict, episodes: int) -> Diagnosis:
    """The diagnosis of one checkpoint payload (``semzoo.run.checkpoint.load_checkpoint``)."""
    from semzoo.config import TrainConfig
    from semzoo.run.trainer import Trainer

    config = TrainConfig.from_dict(payload["config"])
    trainer = Trainer(config, _checkpoint=payload)  # no run directory: nothing is written
    try:
        return _diagnose(trainer, episodes, int(payload["counters"]["env_steps"]))
    finally:
        trainer.close()


@torch.no_grad()
def _diagnose(trainer, episodes: int, env_steps: int) -> Diagnosis:
    buffer, learner = trainer.buffer, trainer.learner
    size = len(buffer)
    clean = CleanBatch.from_batch(buffer.stored(max(0, size - episodes), size))
    mask = clean.mask
    values = learner.online_values(clean)
    y = learner.td_target(clean, learner.next_value(clean, values.q_BTAU))
    reached = discounted_returns(clean.reward, mask, trainer.config.learner.gamma)
    chosen = values.q_BTAU[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
    state = clean.state[:, :-1]
    mixer = learner.mixer
    v = mixing = gain = w1 = w2 = b1 = None
    v_BT = None
    if hasattr(mixer, "hyper_v") and hasattr(mixer, "hyper_w1"):
        v_BT = mixer.hyper_v(state).squeeze(-1)
        v = _mean(v_BT, mask)
        mixing = _mean(values.q_tot_BT - v_BT, mask)
        w1 = _mean(torch.abs(mixer.hyper_w1(state)).mean(-1), mask)
        w2 = _mean(torch.abs(mixer.hyper_w2(state)).mean(-1), mask)
        b1 = _mean(torch.abs(mixer.hyper_b1(state)).mean(-1), mask)
        with torch.enable_grad():
            qs = chosen.detach().clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(mixer(qs, state).sum(), qs)
        gain = _mean(grad.sum(-1), mask)
    length = clean.mask.sum(1).long()
    t_index = torch.arange(mask.shape[1])[None, :].expand_as(mask)
    norm_BT = state.norm(dim=-1)
    by_step: list[tuple[str, float, float, float | None, float]] = []
    for first in range(0, mask.shape[1], BUCKET):
        sel = mask * ((t_index >= first) & (t_index < first + BUCKET))
        if sel.sum() > 0:
            by_step.append((f"{first}-{first + BUCKET - 1}", _mean(values.q_tot_BT, sel), _mean(reached, sel),
                            None if v_BT is None else _mean(v_BT, sel), _mean(norm_BT, sel)))
    limit = trainer.max_t
    last = mask * (t_index == (length[:, None] - 1)) * (length[:, None] == limit)
    if last.sum() > 0:
        by_step.append((f"last ({limit})", _mean(values.q_tot_BT, last), _mean(reached, last),
                        None if v_BT is None else _mean(v_BT, last), _mean(norm_BT, last)))
    return Diagnosis(env_steps=env_steps, episodes=int(clean.mask.shape[0]), q_tot=_mean(values.q_tot_BT, mask),
                     target_y=_mean(y, mask), reached=_mean(reached, mask), reached_max=float(reached.max()),
                     agent_sum=_mean(chosen.sum(-1), mask), state_max=float(torch.abs(state).amax()),
                     v=v, mixing=mixing, gain=gain, w1=w1, w2=w2, b1=b1, by_step=by_step)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(run: Path, diagnoses: list[Diagnosis]) -> list[str]:
    """The markdown lines of a run's diagnoses."""
    lines = [f"### {run.name}", "",
             "| env steps | Q_tot | y | G reached (max) | sum Q_a | V(s) | Q_tot - V(s) | gain dQ_tot/dQ | |W1| | |w2| "
             "| |b1| | |s| max |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d in diagnoses:
        lines.append(f"| {d.env_steps:,} | {d.q_tot:.3f} | {d.target_y:.3f} | {d.reached:.3f} ({d.reached_max:.3f}) "
                     f"| {d.agent_sum:.3f} | {_fmt(d.v)} | {_fmt(d.mixing)} | {_fmt(d.gain)} | {_fmt(d.w1)} "
                     f"| {_fmt(d.w2)} | {_fmt(d.b1)} | {d.state_max:.2f} |")
    last = diagnoses[-1]
    lines += ["", f"By step of the episode at {last.env_steps:,} env steps ({last.episodes} newest episodes):", "",
              "| steps | Q_tot | G reached | V(s) | state norm |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {steps} | {q:.3f} | {g:.3f} | {_fmt(v)} | {n:.2f} |" for steps, q, g, v, n in last.by_step]
    return lines


def checkpoints(run: Path, latest: bool) -> list[Path]:
    paths = sorted(CheckpointManager(run).paths(), key=lambda p: p.stat().st_mtime)
    if not paths:
        raise FileNotFoundError(f"{run}: no checkpoint in {run / 'checkpoints'}: train with --keep-checkpoints 1 or "
                                "more (and --save-interval for several), or use --fresh")
    return paths[-1:] if latest else paths


def fresh_run(args: argparse.Namespace) -> Path:
    """Train the short run ``--fresh`` asks for and return its directory."""
    from semzoo import TrainConfig, train
    from semzoo.cli.base import parse_env_args

    env_args = parse_env_args(args.env_arg)
    config = TrainConfig(env=args.env, env_args=env_args, algo=args.algo, steps=args.steps, seed=args.seed,
                         out=str(args.out), save_interval=args.every, keep_checkpoints=args.steps // args.every + 2)
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return Path(run_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run directories with checkpoints")
    parser.add_argument("--latest", action="store_true", help="read only each run's newest checkpoint")
    parser.add_argument("--episodes", type=int, default=200, help="newest stored episodes read per checkpoint")
    parser.add_argument("--json", type=Path, help="also write the diagnoses to this file")
    fresh = parser.add_argument_group("a short fresh run (--fresh)")
    fresh.add_argument("--fresh", action="store_true")
    fresh.add_argument("--env", default="lbf:Foraging-8x8-2p-2f-coop-v3")
    fresh.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE")
    fresh.add_argument("--algo", default="qmix")
    fresh.add_argument("--steps", type=int, default=30_000)
    fresh.add_argument("--every", type=int, default=10_000)
    fresh.add_argument("--seed", type=int, default=0)
    fresh.add_argument("--out", type=Path, default=Path("runs/value_diagnose"))
    args = parser.parse_args(argv)
    runs = list(args.runs)
    if args.fresh:
        runs.append(fresh_run(args))
    if not runs:
        parser.error("give run directories, or --fresh")
    dump = {}
    for run in runs:
        try:
            load_run_config(run)
            paths = checkpoints(run, args.latest)
        except (FileNotFoundError, ValueError) as err:
            print(f"value_diagnose: {err}", file=sys.stderr)
            return 1
        diagnoses = [diagnose(load_checkpoint(path), args.episodes) for path in paths]
        print("\n".join(report(run, diagnoses)), end="\n\n")
        dump[str(run)] = [d.__dict__ for d in diagnoses]
    if args.json is not None:
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
