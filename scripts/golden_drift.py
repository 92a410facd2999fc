"""How far this machine's golden runs lie from the recording (tests/golden/metrics.json): the largest relative
difference of any metric row, on the pinned numeric paths and on the machine's own (``--native``).

The recording holds on a CPU when every figure is far below the check's ``REL`` (1e-6); tests/golden_runs.py
quotes the figures of each kind of CPU it was checked on.

Usage: python scripts/golden_drift.py [--native] [--case matrix:climbing|qplex ...]
(``SEMZOO_GOLDEN_ISA=avx2`` and the like set ATen's kernels with the rest still pinned; see tests/golden_runs.py.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import golden_runs  # the tests' module: the golden configs, the pin and the recording

CASES = ("matrix:climbing|qplex", "matrix:two_step|sem-qmix", "matrix:climbing|cw-qmix", "smax:3m|saem-qplex")
"""The runs tests/golden_runs.py quotes (one per mixer family and env kind)."""


def largest_relative_difference(rows: list[list[float]], recorded: list[list[float]]) -> float:
    """max |got - want| / |want| over the rows' values (rows whose recorded value is 0 left out)."""
    return max((abs(r[4] - w[4]) / abs(w[4]) for r, w in zip(rows, recorded) if w[4] != 0), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native", action="store_true", help="train on the machine's own numeric paths (no pin)")
    parser.add_argument("--case", action="append", default=None, help="ENV|ALGO of a golden run; repeatable")
    args = parser.parse_args(argv)
    recording = json.loads(golden_runs.GOLDEN_FILE.read_text())
    if args.native:  # no pin at all: the machine's own ATen kernels, MKL, oneDNN and XLA paths
        golden_runs.PINNED_ENV.clear()
        os.environ[golden_runs.ISA_ENV] = "native"
    for case in args.case or CASES:
        if case not in recording:
            parser.error(f"--case {case!r}: no golden run of that name; expected ENV|ALGO, e.g. {CASES[0]}")
        env, algo = case.split("|")
        with tempfile.TemporaryDirectory() as out:
            rows = golden_runs.golden_rows(env, algo, out)
        problem = golden_runs.mismatch(rows, recording[case])
        print(f"{'native' if args.native else f'pinned, ATen {golden_runs.requested_isa()}'} {case}: {len(rows)} rows, largest relative difference "
              f"{largest_relative_difference(rows, recording[case]):.2e}, {problem or 'passes'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
