"""Env steps per second on SMAX: a bare loop over JaxMARL's jitted ``step``, semzoo's PettingZoo
wrapper (SMACParallelEnv over SMAXEnv) and the vectorized backend (SMAXVecEnv), in one run.

Every loop plays uniformly random available actions chosen in NumPy, so the policy cost is the
same; compilation is excluded (one warm-up episode first). For the vectorized env only live
env-steps count (an env that finished waits for the others until the batch resets).

    python scripts/bench_smax.py --map 3m --steps 3000 --n-envs 1 8 32
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario

from semzoo.envs.smax import SMAXVecEnv, parallel_env


def random_legal(avail_XU: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (rng.random(avail_XU.shape) * avail_XU).argmax(-1)


def bench_bare_jaxmarl(map_name: str, n_steps: int, rng: np.random.Generator) -> Callable[[], float]:
    """JaxMARL's own jitted step (auto-reset) and get_avail_actions, no wrapper."""
    env = HeuristicEnemySMAX(scenario=map_name_to_scenario(map_name))
    step = jax.jit(env.step)
    avail_fn = jax.jit(env.get_avail_actions)
    key = jax.random.PRNGKey(0)
    _, state = env.reset(key)

    def one_step(key, state):
        avail = jax.device_get(avail_fn(state))
        acts = random_legal(np.stack([avail[a] for a in env.agents]), rng)
        key, step_key = jax.random.split(key)
        _, state, _reward, dones, _ = step(step_key, state, {a: jnp.int32(acts[i]) for i, a in enumerate(env.agents)})
        jax.device_get(dones["__all__"])
        return key, state

    for _ in range(50):  # warm-up: compile
        key, state = one_step(key, state)

    def measure() -> float:
        nonlocal key, state
        start = time.perf_counter()
        for _ in range(n_steps):
            key, state = one_step(key, state)
        return n_steps / (time.perf_counter() - start)

    return measure


def bench_wrapper(map_name: str, n_steps: int, rng: np.random.Generator) -> Callable[[], float]:
    """SMACParallelEnv over SMAXEnv, stepped with PettingZoo dicts."""
    env = parallel_env(map_name)

    def run(n: int) -> None:
        obs, _ = env.reset(seed=0)
        for _ in range(n):
            if not env.agents:
                obs, _ = env.reset()
            acts = {a: int(random_legal(obs[a]["action_mask"][None], rng)[0]) for a in env.agents}
            obs, *_ = env.step(acts)

    run(50)  # warm-up: compile

    def measure() -> float:
        start = time.perf_counter()
        run(n_steps)
        return n_steps / (time.perf_counter() - start)

    return measure


def bench_vec(map_name: str, n_envs: int, n_steps: int, rng: np.random.Generator) -> Callable[[], float]:
    """SMAXVecEnv: N envs per jitted, vmapped call; counts live env-steps."""
    vec = SMAXVecEnv(map_name, n_envs)

    def run(n_calls: int) -> int:
        arrays = vec.reset(seed=0)
        running = np.ones(n_envs, dtype=bool)
        live_steps = 0
        for _ in range(n_calls):
            if not running.any():
                arrays = vec.reset()
                running[:] = True
            live_steps += int(running.sum())
            arrays, _, term, trunc, _ = vec.step(random_legal(arrays.avail, rng))
            running &= ~(term | trunc)
        return live_steps

    run(20)  # warm-up: compile
    n_calls = max(n_steps // n_envs, 50)

    def measure() -> float:
        start = time.perf_counter()
        live = run(n_calls)
        return live / (time.perf_counter() - start)

    return measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", default="3m")
    parser.add_argument("--steps", type=int, default=3000, help="env steps per measurement")
    parser.add_argument("--n-envs", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the best round is reported")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    loops = {"JaxMARL bare jitted step": bench_bare_jaxmarl(args.map, args.steps, rng)}
    loops["SMACParallelEnv(SMAXEnv)"] = bench_wrapper(args.map, args.steps, rng)
    for n in args.n_envs:
        loops[f"SMAXVecEnv N={n}"] = bench_vec(args.map, n, args.steps * max(1, n // 4), rng)
    # Interleaved rounds, best of each: other processes on a shared machine only ever slow a loop down.
    best = dict.fromkeys(loops, 0.0)
    for _ in range(args.repeats):
        for name, measure in loops.items():
            best[name] = max(best[name], measure())
    rows = list(best.items())

    bare = rows[0][1]
    print(f"SMAX {args.map} on {jax.default_backend()} ({jax.devices()[0].device_kind}), random legal actions, "
          f"best of {args.repeats} rounds")
    print(f"{'loop':<28} {'env steps/s':>12} {'vs bare':>8}")
    for name, sps in rows:
        print(f"{name:<28} {sps:>12.0f} {sps / bare:>7.2f}x")


if __name__ == "__main__":
    main()
