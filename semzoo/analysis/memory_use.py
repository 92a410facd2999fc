"""What the memories did, from the runs' logged diagnostics: merge, cross-hit and hit rates, incentives, codebooks.

The mechanism beside the outcome: a memory whose lookups are answered only by the entry its own step wrote (a
self-hit) adds no other episode's return to its target, whatever its win rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semzoo.analysis.report import RunSeries

MEMORY_DIAGNOSTICS = (("memory_hit_rate", "hit rate", "last"), ("memory_merge_rate", "merge rate", "last"),
                      ("memory_cross_hit_rate", "cross-hit rate", "last"),
                      ("memory_desirable_hit_share", "hits with N_d > 0", "last"),
                      ("reward_incentive", "incentive, mean", "mean"), ("reward_curiosity", "curiosity, mean", "mean"),
                      ("lagma_codes_used", "codes in use", "last"), ("lagma_perplexity", "code perplexity", "last"),
                      ("lagma_reward_extrinsic", "extrinsic reward, mean", "mean"))
"""The figures that show a memory acting (semzoo.episodic.hash_table.TableUsage; a codebook memory's, LAGMA's, from
semzoo.episodic.lagma): metric, column, how a run's rows become one number ("last": the last row, a rate since the
run started, except the hit rate, that of its last window, and the codes in use and their perplexity, those of the
states stored since the row before; "mean": the mean over the run's rows). A run that does not log ``memory_merge_rate``
has its merge rate derived where it can be (``derived_merge_rate``)."""
SELF_HIT_LIMIT = 0.01
"""A memory whose cross-hit rate stays below this answers almost only with the entry its own step wrote."""


@dataclass(frozen=True)
class MemoryUse:
    """Per env and algorithm, each diagnostic's median and range over the runs that log it."""

    env: str
    algo: str
    runs: int
    figures: dict[str, tuple[float, float, float]]
    """metric -> (median, low, high) over runs."""
    derived_merge_runs: int = 0
    """Of the runs behind the merge rate, those whose rate is derived (``derived_merge_rate``), not logged."""

    @property
    def codebook(self) -> bool:
        """A codebook memory (LAGMA): its entries are learned codes, its hit rate is the share of looked-up steps on a
        reference sequence (where its incentive acts), and no return of its table enters a target."""
        return "lagma_codes_used" in self.figures

    @property
    def self_hits_only(self) -> bool:
        """Its lookups were answered (almost) only by entries of a single visit: its E is each step's own return.
        Never for a codebook memory, whose lookups feed an incentive, not a return target."""
        cross = self.figures.get("memory_cross_hit_rate")
        return cross is not None and cross[2] < SELF_HIT_LIMIT and not self.codebook


def derived_merge_rate(run: RunSeries) -> float | None:
    """The merge rate of a run that does not log ``memory_merge_rate`` but logs ``memory_entries`` and
    ``memory_pending_steps``: (writes - entries) / writes, with writes = env steps - pending steps at the last row
    that logs both (every step of a finished episode is written once its pending set is flushed).

    Exact only while nothing was evicted, so None for a run whose entries reached the table's capacity
    (``config.memory.capacity``), for a run without a config, or before its first write.
    """
    if run.config is None or "memory_entries" not in run.metrics or "memory_pending_steps" not in run.metrics:
        return None
    entry_steps, entries = run.metrics["memory_entries"]
    pending_at, pending = run.metrics["memory_pending_steps"]
    both = np.intersect1d(entry_steps, pending_at)
    if not both.size or float(np.max(entries)) >= run.config.memory.capacity:
        return None
    step = both[-1]
    stored = float(entries[int(np.searchsorted(entry_steps, step, side="right")) - 1])
    writes = float(step) - float(pending[int(np.searchsorted(pending_at, step, side="right")) - 1])
    return (writes - stored) / writes if writes > 0 else None


def memory_use(runs: Sequence[RunSeries]) -> list[MemoryUse]:
    """The memory diagnostics of every (env, algo) whose runs log any (``MEMORY_DIAGNOSTICS``); the merge rate of a
    run that does not log it is derived where it can be (``derived_merge_rate``)."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    counts: dict[tuple[str, str], int] = {}
    derived: dict[tuple[str, str], int] = {}
    for run in runs:
        figures = {}
        for name, _, how in MEMORY_DIAGNOSTICS:
            if name in run.metrics and len(run.metrics[name][1]):
                row_values = run.metrics[name][1]
                figures[name] = float(row_values[-1] if how == "last" else np.mean(row_values))
        key = (run.env, run.algo)
        if "memory_merge_rate" not in figures and (merge := derived_merge_rate(run)) is not None:
            figures["memory_merge_rate"] = merge
            derived[key] = derived.get(key, 0) + 1
        if not figures:
            continue
        counts[key] = counts.get(key, 0) + 1
        for name, value in figures.items():
            values.setdefault(key, {}).setdefault(name, []).append(value)
    return [MemoryUse(env=env, algo=algo, runs=counts[(env, algo)],
                      figures={name: (float(np.median(v)), min(v), max(v)) for name, v in per.items()},
                      derived_merge_runs=derived.get((env, algo), 0))
            for (env, algo), per in sorted(values.items())]


def memory_use_table(rows: Sequence[MemoryUse]) -> str:
    names = [(name, column) for name, column, _ in MEMORY_DIAGNOSTICS if any(name in r.figures for r in rows)]
    lines = ["## What the memories did (median and range over runs)", "",
             "Merge rate: the share of writes that met an existing entry; cross-hit rate: the share of lookups "
             "answered by an entry holding more than one visit, so that another episode's return could reach the "
             "target (a self-hit, the entry the step itself wrote, is a hit but not a cross hit). Both since the "
             "run started, at its last row; the hit rate is that of the last row's window. A merge rate marked * is "
             "derived for runs that do not log it: (writes - entries) / writes, writes = env steps - pending "
             "steps, only for runs whose entries stayed below the table's capacity (nothing evicted). For a codebook "
             "memory (LAGMA) an entry is a code: the merge rate is the share of stored steps whose code an earlier "
             "episode visited, the hit rate the share of looked-up steps on a reference sequence (where its incentive "
             "acts), the cross-hit rate the share on one at a code more than one episode visited.", "",
             "| env | algo | runs | " + " | ".join(column for _, column in names) + " |",
             "|---|---|---:|" + "---|" * len(names)]
    for r in rows:
        cells = []
        for name, _ in names:
            if name not in r.figures:
                cells.append("-")
                continue
            median, low, high = r.figures[name]
            mark = "*" if name == "memory_merge_rate" and r.derived_merge_runs else ""
            cells.append(f"{median:.3g} ({low:.3g}-{high:.3g}){mark}" if r.runs > 1 else f"{median:.3g}{mark}")
        lines.append(f"| {r.env} | {r.algo} | {r.runs} | " + " | ".join(cells) + " |")
    flagged = [r for r in rows if r.self_hits_only]
    if flagged:
        lines += ["", "**Self-hits only:** " + ", ".join(f"{r.algo} on {r.env}" for r in flagged)
                  + f" answered fewer than {SELF_HIT_LIMIT:.0%} of lookups from an entry of more than one visit, so "
                  "its target was (almost) each step's own return: what it adds over the base is return mixing, "
                  "not memory of other episodes (compare with mc-<base>)."]
    codebooks = [r for r in rows if r.codebook]
    if codebooks:
        lines += ["", "**Codebooks:** " + "; ".join(_codebook_text(r) for r in codebooks) + "."]
    incentive = [r for r in rows if "reward_incentive" in r.figures and r.figures["reward_incentive"][2] == 0.0]
    if incentive:
        lines += ["", "**No incentive:** " + ", ".join(f"{r.algo} on {r.env}" for r in incentive)
                  + ": the episodic incentive was exactly zero in every logged row; its intrinsic reward was "
                  "curiosity alone."]
    return "\n".join(lines)


def _codebook_text(r: MemoryUse) -> str:
    """One codebook memory's reading: how many codes its states used, and how often its incentive could act."""
    def figure(name: str, form: str) -> str:
        median, low, high = r.figures[name]
        return f"{median:{form}}" if r.runs == 1 or low == high else f"{median:{form}} ({low:{form}}-{high:{form}})"

    text = f"{r.algo} on {r.env} had {figure('lagma_codes_used', '.0f')} codes in use at its last row"
    if "lagma_perplexity" in r.figures:
        text += f" (perplexity {figure('lagma_perplexity', '.3g')})"
    if "memory_hit_rate" in r.figures:
        text += f", {figure('memory_hit_rate', '.2%')} of looked-up steps on a reference sequence"
    if "reward_incentive" in r.figures and "lagma_reward_extrinsic" in r.figures:
        text += (f", an incentive of {figure('reward_incentive', '.3g')} per step against an extrinsic reward of "
                 f"{figure('lagma_reward_extrinsic', '.3g')}")
    return text
