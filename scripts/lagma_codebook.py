"""How many VQ-VAE steps does LAGMA's codebook need before it spreads an env's states over its codes?

LAGMA initialises its codebook U[0, 1) and pulls the codes of each time step towards the encodings of that step (the
coverage loss) at Adam's 5e-4. Where the encodings of an env's states lie close together, far from the initial codes,
every state maps to one code until the codes have travelled there. This script trains LAGMA's VQ-VAE
(``semzoo.episodic.lagma.LAGMAMemory.train_step``, the settings of ``LAGMASettings``) on states of random-policy
episodes, one step per batch of 32 episodes as the learner does, and prints the codes in use, their perplexity and
the spread of the encodings every ``--every`` steps.

    python scripts/lagma_codebook.py                          # SMAX 2s3z, 64 episodes, 12,000 steps
    python scripts/lagma_codebook.py --env smax:3m --steps 6000
    python scripts/lagma_codebook.py --env smax:3m --preset authors-sparse   # LAGMA's sparse-reward settings

Set beside it how many steps LAGMA's schedule gives a run (every update until ``lagma_start_steps`` env steps, then one
every ``lagma_vqvae_interval`` episodes): the run's ``lagma_trainings`` metric counts them.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from semzoo import make_env
from semzoo.config import TrainConfig
from semzoo.episodic.lagma import LAGMAMemory
from semzoo.resolution import resolve


def random_episodes(env_id: str, n: int, seed: int) -> list[np.ndarray]:
    """The global states s_0..s_L of ``n`` episodes of uniformly random available actions: float32 [L+1, S] each."""
    rng = np.random.default_rng(seed)
    env = make_env(env_id)
    episodes = []
    for episode in range(n):
        obs, _ = env.reset(seed=seed + episode)
        states = [np.asarray(env.state(), np.float32)]
        while env.agents:
            actions = {a: int(rng.choice(np.flatnonzero(np.asarray(obs[a]["action_mask"])))) for a in env.agents}
            obs, _, terminated, truncated, _ = env.step(actions)
            states.append(np.asarray(env.state(), np.float32))
            if any(terminated.values()) or any(truncated.values()):
                break
        episodes.append(np.stack(states))
    env.close()
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="smax:2s3z")
    parser.add_argument("--episodes", type=int, default=64, help="random-policy episodes to train on")
    parser.add_argument("--steps", type=int, default=12_000, help="VQ-VAE training steps")
    parser.add_argument("--every", type=int, default=500, help="print a row every this many steps")
    parser.add_argument("--batch", type=int, default=32, help="episodes per step (the learner's batch)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="none", help="the settings of this preset (authors-sparse: LAGMA's sparse "
                        "configs); default: LAGMA's dense SMAC config")
    args = parser.parse_args()

    c = resolve(TrainConfig(algo="lagma-qmix", env=args.env, preset=args.preset)).config.settings("lagma")
    episodes = random_episodes(args.env, args.episodes, args.seed)
    every_state = torch.from_numpy(np.concatenate(episodes))
    memory = LAGMAMemory(state_dim=every_state.shape[1], n_codes=c.lagma_n_codes, latent_dim=c.lagma_latent_dim,
                         hidden_dim=c.lagma_hidden_dim, lr=c.lagma_lr, vq_coef=c.lagma_vq_coef,
                         commit_coef=c.lagma_commit_coef, coverage_coef=c.lagma_coverage_coef, seed=args.seed)
    length = float(np.mean([len(e) - 1 for e in episodes]))
    print(f"{args.env}: {len(episodes)} random episodes, {every_state.shape[0]} states of size {every_state.shape[1]}, "
          f"mean length {length:.1f}; feature std (mean over features) {every_state.std(0).mean():.4f}; "
          f"{c.lagma_n_codes} codes, coefficients {c.lagma_vq_coef} / {c.lagma_commit_coef} / {c.lagma_coverage_coef}")
    print("| step | codes used | perplexity | encoding spread | nearest codes' distance |")
    print("|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(args.seed + 1)
    vqvae = memory.vqvae
    for step in range(args.steps + 1):
        if step % args.every == 0:
            with torch.no_grad():
                z = vqvae.encoder(every_state)
                counts = np.bincount(vqvae.codes(every_state).numpy(), minlength=memory.n_codes)
                p = counts[counts > 0] / counts.sum()
                codes = vqvae.codebook_DK.t()
                gaps = torch.cdist(codes, codes).masked_fill(torch.eye(codes.shape[0], dtype=torch.bool), float("inf"))
            print(f"| {step:,} | {(counts > 0).sum()} | {np.exp(-(p * np.log(p)).sum()):.1f} | "
                  f"{float(z.std(0).mean()):.4f} | {float(gaps.min()):.3f} |", flush=True)
        if step == args.steps:
            break
        batch = [episodes[i] for i in rng.choice(len(episodes), args.batch)]
        states = torch.from_numpy(np.concatenate(batch))
        slots = np.concatenate([np.arange(len(e)) for e in batch])
        memory.train_step(states, slots, max(len(e) for e in batch))


if __name__ == "__main__":
    main()
