"""Golden runs: short seeded runs of every algorithm id whose metric rows are pinned in tests/golden/metrics.json.

`test_golden.py` checks that the package still logs them: a refactor must keep them, and only a change meant to
alter learning re-records them, with `python tests/golden_runs.py` (about 5 minutes on 2 cores). Timing metrics
(machine-dependent) and wall time are left out. A golden run's configuration is ``TrainConfig()`` with the few
fields of ``GOLDEN_OVERRIDES`` (and ``SMAX_OVERRIDES``, ``SAEM_OVERRIDES``) changed; tests/test_defaults.py pins
those overrides and the defaults beside them.

**Double precision and pinned numeric paths (why the recording holds on every x86-64 CPU).** Floats follow
the CPU: ATen picks AVX-512, AVX2 or plain kernels by CPU, MKL picks its own code path by CPU vendor and ISA,
and XLA (SMAX's dynamics) compiles for the host's instructions, each rounding a little differently; a few
hundred updates of a small network turn a last-bit difference into a 1e-6 to 1e-1 one (chaos, not a bug).

Pinning those paths alone (ATen's default kernels, MKL's ``COMPATIBLE`` mode, oneDNN at SSE4.1, XLA at SSE4.2,
one thread) was tried first (commit 53234d8): recorded on an AMD EPYC, it failed 33 of 45 golden runs on an
Intel Xeon (Sapphire Rapids, AVX-512) with every one of those switches set. The float32 rows differed by
2e-7 relative at the first update (3 ulps of a TD loss) and by 2e-6 after 80 steps. Some path that no switch
reaches (we could not tell which from one machine: MKL's CNR mode, libm and NumPy's dispatch were each ruled
out by toggling them here, with no change) still follows the CPU.

So each golden run trains in **float64** (the child sets ``torch.set_default_dtype(torch.float64)``; the env,
the replay buffer and the episodic keys stay float32 as in every run, and the learner casts a sampled batch to
the default dtype) and keeps the pin. In double precision a last-bit difference starts at 1e-16 instead of
6e-8, and the same chaos carries it to about 1e-11, far below the check's ``REL`` = 1e-6. Measured on the Intel
Xeon, no pin, native (AVX-512 kernels, MKL's own path) against ``ATEN_CPU_CAPABILITY=avx2`` with
``MKL_CBWR=AVX2`` and against ``default`` with ``COMPATIBLE``: largest relative difference over all rows
3.0e-11 (climbing, QPLEX), 2.5e-11 (two-step, SEM-QMIX), 5.3e-13 (climbing, CW-QMIX), where the same
comparison in float32 gives 1e-6 to 1e-1. A change of learning is 1e-4 or more in the first rows (a learning
rate 0.1 % off moves the first logged TD loss by 8.7e-5 to 1.3e-3), so the margin is four orders of magnitude
on both sides. ``tests/test_golden.py`` shows that small changes of learning fail against the recording.

Checked on the other vendor (2026-11-25, a 2-core AMD EPYC with AVX-512, the recording made on the Intel Xeon):
all 51 golden tests pass natively, and the largest relative difference of a golden run's rows against the
recording is 1.7e-11 (climbing QPLEX), 7.5e-12 (two-step SEM-QMIX), 6.3e-14 (climbing CW-QMIX) and 9.1e-16
(SMAX 3m SAEM-QPLEX) on the pinned paths; unpinned (the AMD's own AVX-512 kernels, MKL and XLA paths) 2.6e-12,
1.4e-11, 3.8e-13 and 2.5e-8 (SMAX 3m, whose XLA dynamics then compile for this CPU): all below ``REL``. Measured
with ``python scripts/golden_drift.py [--native]``.

**The ISA of the golden children** is the pin's ``default`` unless ``SEMZOO_GOLDEN_ISA`` (``ISA_ENV``) names
``avx2``, ``avx512`` or ``native`` (no ``ATEN_CPU_CAPABILITY``: torch's own pick); only ATen's kernels follow it,
MKL, oneDNN, XLA and the threads stay pinned. Each child reports the capability it ran
(``torch.backends.cpu.get_cpu_capability()``), ``test_golden.py`` checks it is the one asked for, and
tests/conftest.py ends the session with a line such as ``golden children ran under ISA: AVX2 x45``. ``make test``
runs the rows under ``default`` (14 SMAX rows under the ``slow`` mark: ``make test-slow``), ``make test-isa`` under
``avx2``, ``avx512`` and ``native``, skipping one the CPU cannot run or one that gives the kernels of an ISA already
run. torch takes ``ATEN_CPU_CAPABILITY`` at its word:
asked for AVX-512 kernels on a CPU without them it reports ``AVX512`` and dies with SIGILL, so
``isa_unavailable`` runs a few kernels in a child first. Measured 2026-11-26 on a
2-core AMD EPYC whose CPU flags show AVX2 and no AVX-512 (torch's own pick there is AVX2, so ``native`` is
``avx2``, and ``avx512`` is skipped): all 45 golden rows pass under ``avx2`` (and the two-step game's 15 under
``native``), the float64 rows holding as the argument above says; ``scripts/golden_drift.py`` under ``avx2``
gives largest relative differences of 1.2e-11 (climbing QPLEX), 7.0e-11 (two-step SEM-QMIX) and 6.3e-13
(climbing CW-QMIX) against the recording. AVX-512 kernels were not run on a CPU that has them.

Float64 runs start from other initial weights (the initialisers draw in float64), so the golden rows are not
the rows of a float32 run of the same seed: they pin what the code computes, which a refactor must keep. A
float32-only change (a cast that rounds) could pass them; the exactness tests (two runs of one seed, resume)
run in float32 at the machine's own ISA (tests/test_checkpoint.py, tests/test_overlap.py), and CI runs those
under a second ISA setting too.

What the pin does not cover: other architectures (aarch64 has no ATen ``default`` x86 path nor MKL; the
tests skip there with the reason), and another torch or jax release (their kernels change; re-record at the
same code after checking the old recording with the old release).

History of the recording: the float64 recording replaced the pinned float32 one at the 0.3 merge of issue 23.
Before that: 0.1's rows (Intel Xeon, unpinned) were kept, beside one per-CPU recording of the
AMD EPYC, up to commit 4ae19ba; the pinned recording was made from that commit's code. It has the same
env steps, episodes, updates and metric names in every row as both of those; only the values' last digits
moved (by the ISA differences above).
At 0.3 all 45 entries were re-recorded (commit a52a115): the paper's runtime became the default, and two of its
parts reach the golden runs, whose overrides set ``n_envs`` and ``sequential`` but not these: the target syncs as
PyMARL counts (``learner.target_count`` "pymarl": inside an update, one episode later than before, and not before
learning starts) and a time limit is stored as terminal (``learner.timeout_as_terminal``; SMAX 3m's episodes end
at the 60-step limit now and then); every entry also gained ``timeout_rate`` rows, the share of episodes a time
limit ended. The fix of SEM-WQMIX's memory-term normalisation (issue 9) changed none of the entries; SEM-WQMIX's
``target_e_hit`` diagnostic rows were added to the twelve sem-/saem- cw-qmix/ow-qmix entries later, every
other row unchanged. The rows come from the sequential loop (collect, then learn), so the golden runs set
``sequential``.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import signal
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
GOLDEN_DTYPE_NAME = "float64"
"""The golden runs' network precision (see the module docstring: last-bit noise stays near 1e-11)."""
PINNED_ARCHITECTURES = frozenset({"x86_64", "AMD64"})


def pinning_unavailable() -> str | None:
    """Why the pinned recording cannot be reproduced on this machine, or None where it can."""
    if platform.machine() not in PINNED_ARCHITECTURES:
        return f"golden rows are pinned on x86-64 (ATen's default kernels, MKL's COMPATIBLE mode); this is {platform.machine()}"
    return None


ISA_ENV = "SEMZOO_GOLDEN_ISA"
"""The variable that picks the ATen kernels of the golden children (see ``ISAS``); unset: ``default``, the
recording's. Only ATen's kernels follow it: MKL, oneDNN, XLA and the thread counts stay pinned."""
ISAS: dict[str, str | None] = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512", "native": None}
"""Each value of ``ISA_ENV`` and the capability torch then reports (``torch.backends.cpu.get_cpu_capability()``);
``native`` sets no ``ATEN_CPU_CAPABILITY``, so torch picks the kernels for this CPU."""


def requested_isa() -> str:
    """The value of ``ISA_ENV``, ``default`` where it is unset."""
    isa = os.environ.get(ISA_ENV, "default")
    if isa not in ISAS:
        raise ValueError(f"{ISA_ENV}={isa!r}: expected one of {', '.join(ISAS)}; unset it for the recorded 'default'")
    return isa


def child_env(isa: str) -> dict[str, str]:
    """The environment of a golden child: this one's, with ``PINNED_ENV`` and the ATen kernels of ``isa``."""
    env = {**os.environ, **PINNED_ENV}
    if isa == "native":
        env.pop("ATEN_CPU_CAPABILITY", None)
    else:
        env["ATEN_CPU_CAPABILITY"] = isa
    return env


ISA_PROBE = ("import torch; x = torch.linspace(-3, 3, 4099, dtype=torch.float64); "
             "(x.exp() + x.float().sigmoid().double()).sum().item(); print(torch.backends.cpu.get_cpu_capability())")
"""A few vectorized kernels, then the capability torch ran them with."""


@functools.cache
def _probe(isa: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", ISA_PROBE], env=child_env(isa), capture_output=True, text=True,
                          check=False)
    return done.returncode, done.stdout.strip()


def isa_capability(isa: str) -> str:
    """The capability torch runs in a child started for ``isa`` (``AVX2`` ...; torch falls back to its own pick
    where the CPU lacks the kernels asked for, or dies where it believes the CPU has them and it does not)."""
    returncode, capability = _probe(isa)
    if returncode != 0:
        raise RuntimeError(f"{ISA_ENV}={isa}: a child running torch's kernels for it exits with {returncode}")
    return capability


def isa_unavailable(isa: str, already: tuple[str, ...] = ()) -> str | None:
    """Why the golden rows need no run under ``isa`` here (the CPU cannot run it, or it is the kernels of one in
    ``already``), or None where they do."""
    if isa not in ISAS:
        raise ValueError(f"ISA {isa!r}: expected one of {', '.join(ISAS)}")
    if pinning_unavailable() is not None:
        return pinning_unavailable()
    returncode, capability = _probe(isa)
    if returncode != 0:  # torch takes ATEN_CPU_CAPABILITY at its word: AVX-512 kernels on an AVX2 CPU stop (SIGILL)
        return f"this CPU cannot run torch's {ISAS[isa] or 'own'} kernels (a child asked for them exits with {returncode})"
    if ISAS[isa] is not None and capability != ISAS[isa]:
        return f"this CPU has no {ISAS[isa]} kernels for torch (asked for them, it runs {capability})"
    same = [other for other in already if _probe(other) == (0, capability)]
    if same:
        return f"{isa} runs the {capability} kernels here, as {same[0]} did"
    return None


GOLDEN_OVERRIDES: dict[str, Any] = {
    "seed": 7, "steps": 240, "n_envs": 4, "test_interval": 120, "test_episodes": 4, "log_interval": 40,
    "save_interval": 0, "threads": 1, "device": "cpu", "sequential": True,
    "learner.batch_size": 4, "learner.buffer_size": 16, "learner.target_update_episodes": 8, "learner.lr": 5e-3,
    "memory.lam": 0.5, "memory.pending_size": 30, "memory.capacity": 1000,
    "wqmix.central_embed_dim": 32, "qplex.qplex_heads": 2,
    "exploration.epsilon_anneal_steps": 200,
}
"""Where a golden run departs from ``TrainConfig()``, by config key: a short run that still makes a few updates,
target syncs and table writes. Every other field is the default, which tests/test_defaults.py pins to its
source; that test pins this dict and the two below too, so a changed default cannot pass both unnoticed."""
SMAX_OVERRIDES: dict[str, Any] = {"steps": 300, "test_interval": 150, "log_interval": 60,
                                  "env_args": {"profile": "smax"}}
"""On top of ``GOLDEN_OVERRIDES`` for ``smax:`` envs (episodes of up to 60 steps, where a matrix game's are 1 or 2),
on SMAX's own rules as they were recorded (a run's default on 3m is SMAC's profile, which tests/test_smac_profile.py
covers)."""
SAEM_OVERRIDES: dict[str, Any] = {"memory.miss_rule": "zero"}
"""On top of ``GOLDEN_OVERRIDES`` for ``saem-`` algorithms."""


def golden_overrides(env: str, algo: str) -> dict[str, Any]:
    """The config keys a golden run of (env, algo) sets, with their values (``GOLDEN_OVERRIDES`` and the rest); a
    component's key (``qplex.qplex_heads``) only where the algorithm trains with that component."""
    from semzoo.config import registered_components

    components = registered_components()
    overrides = {"env": env, "algo": algo, **GOLDEN_OVERRIDES, **(SMAX_OVERRIDES if env.startswith("smax:") else {}),
                 **(SAEM_OVERRIDES if algo.startswith("saem-") else {})}
    return {key: value for key, value in overrides.items()
            if key.partition(".")[0] not in components or components[key.partition(".")[0]].used_by(algo)}


def golden_config_dict(env: str, algo: str) -> dict[str, Any]:
    """``golden_overrides`` as a nested dict, a section's keys under its name (the form ``golden_config`` merges)."""
    nested: dict[str, Any] = {}
    for key, value in golden_overrides(env, algo).items():
        section, _, name = key.rpartition(".")
        (nested.setdefault(section, {}) if section else nested)[name] = value
    return nested


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

    config = TrainConfig(algo=algo).to_dict()  # with the sections of the algorithm's components
    for layer in (golden_config_dict(env, algo), changes or {}):
        for key, value in layer.items():
            config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    config["out"] = str(out)
    return config


def golden_rows(env: str, algo: str, out: str | Path, changes: dict[str, Any] | None = None) -> list[list[Any]]:
    """Train the golden run of (env, algo) under ``out`` in a subprocess on the pinned numeric paths; its rows.

    ``changes`` alters the config (a test's way to show that a change of learning is caught).
    """
    return golden_run(env, algo, out, changes)[0]


def golden_run(env: str, algo: str, out: str | Path, changes: dict[str, Any] | None = None,
               ) -> tuple[list[list[Any]], str]:
    """``golden_rows``, and the ATen capability the child ran under (``requested_isa()`` picks it)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config_file = out / "golden-config.json"
    config_file.write_text(json.dumps(golden_config(env, algo, out, changes)))
    done = subprocess.run([sys.executable, __file__, "--train", str(config_file)], env=child_env(requested_isa()),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        how = f"signal {signal.Signals(-done.returncode).name}" if done.returncode < 0 else f"exit {done.returncode}"
        raise RuntimeError(f"golden run {env}|{algo} failed ({how}, {ISA_ENV}={requested_isa()}):\n"
                           f"{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["rows"], result["isa"]


def _train_here(config_file: str) -> dict[str, Any]:
    """The child's side of ``golden_run``: train the config in this process (already pinned); its rows and ISA."""
    import torch

    from semzoo import TrainConfig, train

    torch.set_default_dtype(getattr(torch, GOLDEN_DTYPE_NAME))
    config = TrainConfig.from_dict(json.loads(Path(config_file).read_text()))
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return {"rows": metric_rows(run_dir), "isa": torch.backends.cpu.get_cpu_capability()}


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
    if sys.argv[1:2] == ["--train"]:  # the pinned child of golden_run
        print(json.dumps(_train_here(sys.argv[2])))
        sys.exit(0)
    if sys.argv[1:2] == ["--isa-unavailable"]:  # make test-isa: why not to run under ISA (after ALREADY ...)
        print(isa_unavailable(sys.argv[2], tuple(sys.argv[3:])) or "")
        sys.exit(0)
    if requested_isa() != "default":
        sys.exit(f"{ISA_ENV}={requested_isa()}: the recording is made under the pin; unset {ISA_ENV} to record")
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    GOLDEN_FILE.write_text(json.dumps(record(), indent=0))
    print(f"wrote {GOLDEN_FILE}")
