"""Golden runs: short seeded runs of every algorithm id whose metric rows are pinned in tests/golden/.

The rows were recorded before the "one home per concept" restructure; `test_golden.py` checks that the
restructured package reproduces them. Timing metrics (machine-dependent) and wall time are left out.
Re-record (only when a change is meant to alter learning) with `python tests/golden_runs.py`.

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

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN_FILE = Path(__file__).parent / "golden" / "metrics.json"
MIXERS = ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix")
ALGOS = tuple(f"{prefix}{mixer}" for prefix in ("", "sem-", "saem-") for mixer in MIXERS)
ENVS = ("matrix:two_step", "matrix:climbing", "smax:3m")
TIMING = frozenset({"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s", "checkpoint_time_s",
                    "checkpoint_mb"})


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
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    GOLDEN_FILE.write_text(json.dumps(record(), indent=0))
    print(f"wrote {GOLDEN_FILE}")
