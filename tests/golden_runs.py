"""Golden runs: short seeded runs of every algorithm id whose metric rows are pinned in tests/golden/.

The rows were recorded before the "one home per concept" restructure; `test_golden.py` checks that the
restructured package reproduces them. Timing metrics (machine-dependent) and wall time are left out.
Re-record (only when a change is meant to alter learning) with `python tests/golden_runs.py`.

The values are exact on one kind of CPU only (``float_fingerprint``): the reference was recorded on an
Intel Xeon; ``python tests/golden_runs.py --this-machine`` records another kind's floats beside it, as
``metrics-<fingerprint>.json``, which the tests then use on that kind of machine. The rows' env steps,
episodes, updates and metric names are the same on every machine.

The fix of SEM-WQMIX's memory-term normalisation (issue 9: divided by all real steps, no longer by the
answered ones under miss rule "zero") changed none of the entries: re-recording saem-cw-qmix and
saem-ow-qmix (the WQMIX ids with miss rule "zero") on all three envs gave byte-identical rows, because
in these short runs every sampled batch's SAEM lookups hit all or nothing, where both divisions agree.
tests/test_one_loss.py pins the fix instead.

The rows come from the sequential loop (collect, then learn), so the golden runs set ``sequential``: they
prove that the flag restores that loop bit for bit now that acting overlaps learning by default.

One later change is a new diagnostic, not learning: SEM-WQMIX now logs ``target_e_hit`` like every other
learner with memory. The twelve sem-/saem- cw-qmix/ow-qmix entries were re-recorded then, after checking
that each new recording minus its ``target_e_hit`` rows equals the 0.1 recording row for row (4 or 6
rows added per entry, every other row identical).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN_FILE = Path(__file__).parent / "golden" / "metrics.json"
"""The reference recording (0.1's, on the Intel Xeon the project started on)."""
MIXERS = ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix")
ALGOS = tuple(f"{prefix}{mixer}" for prefix in ("", "sem-", "saem-") for mixer in MIXERS)
ENVS = ("matrix:two_step", "matrix:climbing", "smax:3m")
TIMING = frozenset({"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s", "checkpoint_time_s",
                    "checkpoint_mb"})


@functools.cache
def float_fingerprint() -> str:
    """12 hex digits of the exact floats a small seeded GRU, linear layer and RMSprop step give on this CPU.

    The golden values are bit-exact on the machine that recorded them, but the CPU's kernels (MKL and
    ATen's vector code pick AVX-512 or AVX2 paths by CPU) round differently elsewhere, and a few hundred
    updates turn a last-bit difference into a 1e-4 to 1e-1 one. Machines whose fingerprints agree
    compute the golden runs' floats alike, so a recording is kept per fingerprint.
    """
    import hashlib

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            # an agent network's GRU and head, and a QMIX-style hypernetwork (abs, bmm, elu)
            cell, head = torch.nn.GRUCell(40, 64), torch.nn.Linear(64, 9)
            hyper = torch.nn.Linear(48, 3 * 32)
            params = [*cell.parameters(), *head.parameters(), *hyper.parameters()]
            optimiser = torch.optim.RMSprop(params, lr=5e-3, alpha=0.99, eps=1e-5)
            x, state = torch.randn(8, 12, 40), torch.randn(8, 4, 48)
            for _ in range(3):
                h = torch.zeros(12, 64)
                q = []
                for t in range(8):
                    h = cell(x[t], h)
                    q.append(head(h).max(-1).values.view(4, 3))
                w = torch.abs(hyper(state)).view(8, 4, 3, 32)
                mixed = torch.nn.functional.elu(torch.einsum("tba,tbah->tbh", torch.stack(q), w))
                loss = (mixed.sum(-1) ** 2).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        digest = hashlib.sha256()
        for tensor in [*params, h.detach()]:
            digest.update(tensor.detach().numpy().tobytes())
        return digest.hexdigest()[:12]
    finally:
        torch.set_num_threads(threads)


def machine_file() -> Path:
    """Where this kind of CPU's recording lives: ``metrics-<float_fingerprint>.json`` beside the reference."""
    return GOLDEN_FILE.with_name(f"metrics-{float_fingerprint()}.json")


def golden_file() -> Path:
    """This machine's recording where there is one, else the reference."""
    own = machine_file()
    return own if own.exists() else GOLDEN_FILE


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


def golden_rows(env: str, algo: str, out: str | Path) -> list[list[Any]]:
    """Train the golden run of (env, algo) under ``out`` through the public interface; its metric rows."""
    from semzoo import TrainConfig, train

    base = TrainConfig().to_dict()
    for key, value in golden_config_dict(env, algo).items():
        base[key] = {**base[key], **value} if isinstance(value, dict) else value
    base["out"] = str(out)
    run_dir, _ = train(TrainConfig.from_dict(base), progress=False, tensorboard=False)
    return metric_rows(run_dir)


def record() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for env in ENVS:
            for algo in ALGOS:
                out[f"{env}|{algo}"] = golden_rows(env, algo, tmp)
                print(env, algo, len(out[f"{env}|{algo}"]), "rows", file=sys.stderr)
    return out


if __name__ == "__main__":
    # --this-machine: record this CPU's floats beside the reference (only after the reference passes on a
    # machine of its kind at the same commit: the recording must pin the same code, not new behaviour).
    path = machine_file() if "--this-machine" in sys.argv else GOLDEN_FILE
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record(), indent=0))
    print(f"wrote {path}")
