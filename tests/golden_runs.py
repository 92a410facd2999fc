"""Golden runs: short seeded runs of every algorithm id whose metric rows are pinned in tests/golden/metrics.json.

`test_golden.py` checks that the package still logs them: a refactor must keep them, and only a change meant to
alter learning re-records them, with `python tests/golden_runs.py` (about 5 minutes on 2 cores). Timing metrics
(machine-dependent) and wall time are left out.

**Pinned numeric paths (why the recording holds on every x86-64 CPU).** Floats follow the CPU: ATen picks
AVX-512, AVX2 or plain kernels by CPU, MKL picks its own code path by CPU vendor and ISA, and XLA (SMAX's
dynamics) compiles for the host's instructions, each rounding a little differently; a few hundred updates
turn a last-bit difference into a 1e-6 to 1e-1 one. Measured on one AMD EPYC (AVX-512): the golden run of
``matrix:climbing|qplex`` gives three different rows under ``ATEN_CPU_CAPABILITY=default``, ``avx2`` and
native, and with ATen pinned, three more under ``MKL_CBWR`` unset, ``AVX2`` and ``COMPATIBLE``. So each
golden run trains in a subprocess whose environment (``PINNED_ENV``) fixes every one of those choices to
the one path every x86-64 CPU has: ATen's default (SSE2) kernels, MKL's conditional numerical
reproducibility mode ``COMPATIBLE`` (documented by Intel to give the same results on all Intel and
compatible processors), oneDNN capped at SSE4.1, XLA capped at SSE4.2 (no FMA contraction), one thread.
The parent's own ISA setting then changes nothing, and the recording holds on Intel and AMD alike.

The other direction, a tolerance measured from last-bit noise, was rejected. Measured on the AMD EPYC
(values above 1e-3): the 45 golden runs at the native ISA (AVX-512) differ from their pinned rows by a
largest relative difference of 1e-6 to 0.12 per run (median 2.6e-5; five runs above 1e-2). A change of
learning starts smaller than that: a learning rate 0.1 % off moves the first logged TD loss by 8.7e-5 (climbing,
QMIX) and 1.3e-3 (two-step, SEM-VDN). A tolerance wide enough for every CPU we measured would let such a change
through its first rows, and CPUs we cannot measure may spread wider. ``tests/test_golden.py`` shows that small
changes of learning fail against the pinned recording.

What the pin does not cover: other architectures (aarch64 has no ATen ``default`` x86 path nor MKL; the
tests skip there with the reason), and another torch or jax release (their kernels change; re-record at the
same code after checking the old recording with the old release). The exactness within one machine (two
runs of one seed, resume) is tested natively, at the machine's own ISA (tests/test_checkpoint.py,
tests/test_overlap.py), and CI runs those tests under a second ISA setting too.

History of the recording: 0.1's rows (Intel Xeon, unpinned) were kept, beside one per-CPU recording of the
AMD EPYC, up to commit 4ae19ba; the pinned recording was made from that commit's code. It has the same
env steps, episodes, updates and metric names in every row as both of those; only the values' last digits
moved (by the ISA differences above).
The fix of SEM-WQMIX's memory-term normalisation (issue 9) changed none of the entries; SEM-WQMIX's
``target_e_hit`` diagnostic rows were added to the twelve sem-/saem- cw-qmix/ow-qmix entries later, every
other row unchanged. The rows come from the sequential loop (collect, then learn), so the golden runs set
``sequential``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

GOLDEN_FILE = Path(__file__).parent / "golden" / "metrics.json"
"""The recording, made under ``PINNED_ENV``."""
MIXERS = ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix")
ALGOS = tuple(f"{prefix}{mixer}" for prefix in ("", "sem-", "saem-") for mixer in MIXERS)
ENVS = ("matrix:two_step", "matrix:climbing", "smax:3m")
TIMING = frozenset({"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s", "checkpoint_time_s",
                    "checkpoint_mb"})
REL, ABS = 1e-6, 1e-9
"""How close a value must be: the same arithmetic in the same order gives the same floats; this only absorbs a
sum reordered by a harmless refactor."""

PINNED_ENV = {
    "ATEN_CPU_CAPABILITY": "default",  # ATen's kernels without AVX: the same instructions on every x86-64 CPU
    "MKL_CBWR": "COMPATIBLE",  # MKL's reproducible mode: one code path for Intel and AMD, whatever their ISA
    "ONEDNN_MAX_CPU_ISA": "SSE41",  # oneDNN (unused by these fp32 runs today) held to the same lowest path
    "XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2",  # SMAX's jitted dynamics without AVX or FMA contraction
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
PINNED_ARCHITECTURES = frozenset({"x86_64", "AMD64"})


def pinning_unavailable() -> str | None:
    """Why the pinned recording cannot be reproduced on this machine, or None where it can."""
    if platform.machine() not in PINNED_ARCHITECTURES:
        return f"golden rows are pinned on x86-64 (ATen's default kernels, MKL's COMPATIBLE mode); this is {platform.machine()}"
    return None


def golden_config_dict(env: str, algo: str) -> dict[str, Any]:
    """A TrainConfig as a dict (the stable, serialised form): a few updates, target syncs and table writes."""
    smax = env.startswith("smax:")
    return {
        "env": env, "algo": algo, "seed": 7, "steps": 300 if smax else 240, "n_envs": 4,
        "test_interval": 150 if smax else 120, "test_episodes": 4, "log_interval": 60 if smax else 40,
        "save_interval": 0, "threads": 1, "device": "cpu", "sequential": True,
        "learner": {"batch_size": 4, "buffer_size": 16, "target_update_episodes": 8, "lr": 5e-3},
        "memory": {"lam": 0.5, "pending_size": 30, "capacity": 1000,
                   "miss_rule": "zero" if algo.startswith("saem-") else "target"},
        "mixer": {"central_embed_dim": 32, "qplex_heads": 2},
        "exploration": {"epsilon_anneal_steps": 200},
    }


def metric_rows(run_dir: Path) -> list[list[Any]]:
    """[env_steps, episodes, updates, name, value] per metrics.csv row, timing rows left out."""
    import csv

    with (run_dir / "metrics.csv").open(newline="") as f:
        return [[int(r["env_steps"]), int(r["episodes"]), int(r["updates"]), r["name"], float(r["value"])]
                for r in csv.DictReader(f) if r["name"] not in TIMING]


def golden_config(env: str, algo: str, out: str | Path, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full config dict of the golden run of (env, algo) writing under ``out``, with ``changes`` merged in
    (a section's dict updates that section)."""
    from semzoo import TrainConfig

    config = TrainConfig().to_dict()
    for layer in (golden_config_dict(env, algo), changes or {}):
        for key, value in layer.items():
            config[key] = {**config[key], **value} if isinstance(value, dict) else value
    config["out"] = str(out)
    return config


def golden_rows(env: str, algo: str, out: str | Path, changes: dict[str, Any] | None = None) -> list[list[Any]]:
    """Train the golden run of (env, algo) under ``out`` in a subprocess on the pinned numeric paths; its rows.

    ``changes`` alters the config (a test's way to show that a change of learning is caught).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config_file = out / "golden-config.json"
    config_file.write_text(json.dumps(golden_config(env, algo, out, changes)))
    env_vars = {**os.environ, **PINNED_ENV}
    done = subprocess.run([sys.executable, __file__, "--train", str(config_file)], env=env_vars,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"golden run {env}|{algo} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _train_here(config_file: str) -> list[list[Any]]:
    """The child's side of ``golden_rows``: train the config in this process (already pinned) and return its rows."""
    from semzoo import TrainConfig, train

    config = TrainConfig.from_dict(json.loads(Path(config_file).read_text()))
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return metric_rows(run_dir)


def mismatch(rows: list[list[Any]], expected: list[list[Any]]) -> str | None:
    """The first difference between a run's rows and the recorded ones, or None where they agree.

    Env steps, episodes, updates and metric names must match exactly, values to ``REL`` relative.
    """
    if [r[:4] for r in rows] != [r[:4] for r in expected]:
        got, want = [r[:4] for r in rows], [r[:4] for r in expected]
        first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        return f"row {first}: {got[first:first + 1]} != {want[first:first + 1]} ({len(got)} rows, {len(want)} recorded)"
    for got, want in zip(rows, expected):
        if abs(got[4] - want[4]) > max(REL * abs(want[4]), ABS):
            return f"{got[:4]}: {got[4]!r} != {want[4]!r}"
    return None


def record(jobs: int = 2) -> dict[str, Any]:
    cases = [(env, algo) for env in ENVS for algo in ALGOS]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        results = pool.map(lambda case: golden_rows(*case, Path(tmp) / f"{case[0]}-{case[1]}".replace(":", "_")),
                           cases)
        out = {}
        for (env, algo), rows in zip(cases, results):
            out[f"{env}|{algo}"] = rows
            print(env, algo, len(rows), "rows", file=sys.stderr)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:  # the pinned child of golden_rows
        print(json.dumps(_train_here(sys.argv[2])))
        sys.exit(0)
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    GOLDEN_FILE.write_text(json.dumps(record(), indent=0))
    print(f"wrote {GOLDEN_FILE}")
