"""Behaviour is kept: every algorithm id, trained briefly with a fixed seed, logs the rows recorded before the restructure.

The rows (tests/golden/metrics.json) come from 0.1 (commit 3f3470a), through `tests/golden_runs.py`; on a
CPU that rounds differently, from that CPU's recording of the same code (``golden_runs.golden_file``).
Env steps, episodes, updates and metric names must match exactly, values to 1e-6 relative (the same
arithmetic in the same order gives the same floats; the tolerance only absorbs a reordered sum).
"""

from __future__ import annotations

import json

import pytest
from golden_runs import ALGOS, ENVS, golden_file, golden_rows

GOLDEN = json.loads(golden_file().read_text())
REL = 1e-6


def _cases():
    for env in ENVS:
        marks = [pytest.mark.smax] if env.startswith("smax:") else []
        for algo in ALGOS:
            yield pytest.param(env, algo, marks=marks, id=f"{env}|{algo}")


@pytest.mark.parametrize(("env", "algo"), list(_cases()))
def test_seeded_run_logs_the_recorded_metric_rows(env, algo, tmp_path):
    if env.startswith("smax:"):
        pytest.importorskip("jaxmarl")
    rows = golden_rows(env, algo, tmp_path)
    expected = GOLDEN[f"{env}|{algo}"]
    assert [r[:4] for r in rows] == [r[:4] for r in expected]
    for got, want in zip(rows, expected):
        assert got[4] == pytest.approx(want[4], rel=REL, abs=1e-9), f"{got[:4]}: {got[4]!r} != {want[4]!r}"
