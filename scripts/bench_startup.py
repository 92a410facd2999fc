"""The start-up time of the CLI: the median wall time of `semzoo --help`, `semzoo --version`, `semzoo algos` and
`semzoo memory-cost 3m`.

    python scripts/bench_startup.py [--runs 5]

Each command runs in a fresh process (``python -m semzoo.cli``), as a user's shell starts it; the first run of each
is a warm-up, not counted (the file cache). None of them imports torch: the algorithm table and the registries
know the built-in names without importing their modules, and `memory-cost` reads each built-in memory's byte
formula from ``semzoo.episodic.plans``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = (["--help"], ["--version"], ["algos"], ["memory-cost", "3m"])


def wall_time(args: list[str]) -> float:
    """Seconds one `semzoo ARGS` takes, from the start of its process to its exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "semzoo.cli", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="Timed runs of each command (after one warm-up).")
    args = parser.parse_args()
    for command in COMMANDS:
        wall_time(command)
        times = [wall_time(command) for _ in range(args.runs)]
        print(f"semzoo {' '.join(command):<10} median {statistics.median(times):.2f} s over {args.runs} runs "
              f"(min {min(times):.2f} s, max {max(times):.2f} s)")


if __name__ == "__main__":
    main()
