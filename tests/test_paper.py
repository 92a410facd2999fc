"""The paper's numbers beside a recomputed score table: which cells compare, and what ``semzoo report`` writes."""

from __future__ import annotations

import math

import pytest
from test_protocol import REPS, write_run

from semzoo.analysis.paper import (
    PAPER_ALGOS,
    PAPER_BASES,
    PAPER_MAPS,
    PAPER_TABLE_1,
    PAPER_WIN_RATE,
    direction,
    paper_cells,
    paper_markdown,
    table_1_cells,
    table_1_markdown,
    table_1_rows,
)
from semzoo.analysis.protocol import report
from semzoo.analysis.report import TableRow


def test_the_paper_tables_are_transcribed_cell_by_cell():
    # Spot checks across both appendix tables, both halves (first four maps, last four) and all four bases.
    assert PAPER_WIN_RATE[("2s3z", "qplex", 500_000)] == 0.98
    assert PAPER_WIN_RATE[("3s5z", "sem-cw-qmix", 250_000)] == 0.63
    assert PAPER_WIN_RATE[("27m_vs_30m", "sem-vdn", 500_000)] == 0.01
    assert PAPER_WIN_RATE[("MMM2", "sem-cw-qmix", 250_000)] == 0.03
    assert PAPER_WIN_RATE[("bane_vs_bane", "qmix", 500_000)] == 0.24
    assert len(PAPER_WIN_RATE) == 2 * 8 * 8  # steps x algorithms x maps


@pytest.mark.parametrize("key", sorted(PAPER_TABLE_1))
def test_table_1_follows_from_the_appendix_tables_to_within_a_point(key):
    # Two transcriptions of one paper checked against each other: Table 1 is the mean and median over the
    # eight maps of the appendix numbers (the paper rounded each map's number after computing Table 1).
    base, step = key
    per_map = [(PAPER_WIN_RATE[(m, base, step)], PAPER_WIN_RATE[(m, f"sem-{base}", step)]) for m in PAPER_MAPS]
    recomputed = [100 * v for v in table_1_cells(per_map)]
    assert recomputed == pytest.approx(PAPER_TABLE_1[key], abs=1.0)
    assert {b for b, _ in PAPER_TABLE_1} == set(PAPER_BASES)
    assert {*PAPER_BASES, *(f"sem-{b}" for b in PAPER_BASES)} == set(PAPER_ALGOS)


def row(env, algo, step=500_000, value=0.5, seeds=3):
    return TableRow(step=step, algo=algo, env=env, value=value, seeds=seeds)


def test_only_smac_maps_at_the_paper_defaults_steps_and_metric_compare():
    rows = [row("smax:2s3z", "qmix"), row("smac:3s5z", "sem-qplex", step=250_000),
            row("smax:3m", "qmix"),  # a map the paper did not run
            row("matrix:climbing", "qmix"),  # not a SMAC map at all
            row("smax:2s3z", "sem-qmix lam=0.5"),  # settings off the paper's: another method
            row("smax:2s3z", "ow-qmix"),  # not one of the paper's eight
            row("smax:2s3z", "qmix", step=300_000),  # not one of its steps
            row("smax:2s3z", "sem-qmix", seeds=0, value=math.nan),  # no run reached the step
            row("mean", "qmix")]
    cells = paper_cells(rows, "test_win_rate")
    assert [(c.env, c.algo, c.step, c.paper) for c in cells] == [("smax:2s3z", "qmix", 500_000, 0.91),
                                                                 ("smac:3s5z", "sem-qplex", 250_000, 0.77)]
    assert paper_cells(rows, "test_return_mean") == []


@pytest.mark.parametrize(("with_memory", "base", "expected"),
                         [(0.9, 0.5, "SEM ahead"), (0.5, 0.9, "base ahead"), (0.91, 0.91, "tie"),
                          (math.nan, 0.5, "n/a")])
def test_direction(with_memory, base, expected):
    assert direction(with_memory, base) == expected


def test_a_pair_with_one_side_run_shows_the_other_as_missing():
    table = paper_markdown(paper_cells([row("smax:3s5z", "qplex", value=0.3125, seeds=1)], "test_win_rate"))
    assert "| smax:3s5z, 0.5M | qplex | 80 / 31 (1 seed) | 92 / - | SEM ahead / n/a |" in table


def test_report_sets_the_paper_beside_the_recomputed_win_rates(tmp_path):
    root = tmp_path / "runs"
    for seed, (early, late) in enumerate([(0.2, 0.3), (0.4, 0.5)]):
        write_run(root, "smax:2s3z", "qmix", seed, {250_000: early, 500_000: late})
        write_run(root, "smax:2s3z", "sem-qmix", seed, {250_000: early + 0.4, 500_000: late + 0.4})
    result = report(root, at=[250_000, 500_000], reps=REPS, out=tmp_path / "report")
    assert {(c.algo, c.step): (c.paper, round(c.here, 6), c.seeds) for c in result.beside_paper} == {
        ("qmix", 250_000): (0.61, 0.3, 2), ("sem-qmix", 250_000): (0.89, 0.7, 2),
        ("qmix", 500_000): (0.91, 0.4, 2), ("sem-qmix", 500_000): (0.91, 0.8, 2)}
    # The paper has SEM-QMIX tied with QMIX on 2s3z at 0.5M; these runs have SEM ahead.
    assert "| smax:2s3z, 0.5M | qmix | 91 / 40 (2 seeds) | 91 / 80 (2 seeds) | tie / SEM ahead |" in result.markdown
    assert (tmp_path / "report" / "report.md").read_text() == result.markdown


def test_report_on_maps_the_paper_did_not_run_has_no_such_section(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "smax:3m", "qmix", 0, {250_000: 0.5, 500_000: 0.6})
    result = report(root, at=[250_000, 500_000], reps=REPS, out=tmp_path / "report")
    assert result.beside_paper == [] and result.table_1 == []
    assert "Beside the paper" not in result.markdown and "Table 1 layout" not in result.markdown


def test_table_1_pools_only_maps_with_both_sides_and_never_two_simulators():
    rows = [row("smax:2s3z", "qmix", value=0.2, seeds=5), row("smax:2s3z", "sem-qmix", value=0.6, seeds=4),
            row("smax:3s5z", "qmix", value=0.4), row("smax:3s5z", "sem-qmix", value=1.0),
            row("smax:27m_vs_30m", "qmix", value=0.0),  # no SEM-QMIX there: out of the row
            row("smac:2s3z", "vdn", value=0.9), row("smac:2s3z", "sem-vdn", value=0.95, seeds=1)]
    table = table_1_rows(paper_cells(rows, "test_win_rate"))
    assert [(r.family, r.base, r.maps, r.seeds) for r in table] == [("smax", "qmix", ("2s3z", "3s5z"),
                                                                    ((5, 4), (3, 3))),
                                                                   ("smac", "vdn", ("2s3z",), ((3, 1),))]
    qmix = table[0]
    assert qmix.here == pytest.approx((0.3, 0.8, 0.3, 0.8))
    # The paper on 2s3z and 3s5z at 0.5M: QMIX 91 and 62, SEM-QMIX 91 and 84; Table 1 as printed.
    assert qmix.paper_same_maps == pytest.approx((0.765, 0.875, 0.765, 0.875))
    assert qmix.paper == pytest.approx((0.35, 0.55, 0.28, 0.76))
    assert ("| qmix, 0.5M | smax: 2s3z (5 / 4), 3s5z (3) | 30 -> 80 | 77 -> 88 | 35 -> 55 | 30 -> 80 | 77 -> 88 | "
            "28 -> 76 |") in table_1_markdown(table)


def test_report_writes_the_table_1_layout(tmp_path):
    root = tmp_path / "runs"
    for env, (base, with_memory) in {"smax:2s3z": (0.25, 0.75), "smax:3s5z": (0.0, 0.5)}.items():
        for algo, value in (("cw-qmix", base), ("sem-cw-qmix", with_memory)):
            write_run(root, env, algo, 0, {250_000: value, 500_000: value})
    result = report(root, at=[500_000], reps=REPS, out=tmp_path / "report")
    assert [(r.base, r.step, r.maps) for r in result.table_1] == [("cw-qmix", 500_000, ("2s3z", "3s5z"))]
    assert "## The paper's Table 1 layout over these maps" in result.markdown
    # here 13 -> 63 (halves up); the paper on these maps: CW-QMIX 78, 49 and SEM-CW-QMIX 95, 75 at 0.5M.
    assert "| 13 -> 63 | 64 -> 85 | 46 -> 52 |" in result.markdown


def test_the_authors_smac_setup_compares_with_the_paper_in_rows_of_its_own():
    # The paper ran its baselines from their authors' code: QPLEX in that setup (--preset authors-smac) sits
    # beside the paper's QPLEX too, paired with SEM-QPLEX in the same setup, never with the default's.
    rows = [row("smax:3s5z", "qplex", value=0.08, seeds=5), row("smax:3s5z", "sem-qplex", value=0.33, seeds=5),
            row("smax:3s5z", "qplex preset=authors-smac", value=0.02, seeds=2),
            row("smax:3s5z", "sem-qplex preset=authors-smac", value=0.59, seeds=1),
            row("smax:3s5z", "qplex preset=authors-smac qatten_heads=8")]  # off the authors' setup: another method
    cells = paper_cells(rows, "test_win_rate")
    assert [(c.label, c.algo, c.setup, c.paper) for c in cells] == [
        ("qplex", "qplex", "", 0.80), ("sem-qplex", "sem-qplex", "", 0.92),
        ("qplex preset=authors-smac", "qplex", "preset=authors-smac", 0.80),
        ("sem-qplex preset=authors-smac", "sem-qplex", "preset=authors-smac", 0.92)]
    table = paper_markdown(cells)
    assert ("| smax:3s5z, 0.5M | qplex preset=authors-smac | 80 / 2 (2 seeds) | 92 / 59 (1 seed) | "
            "SEM ahead / SEM ahead |") in table
    assert "| smax:3s5z, 0.5M | qplex | 80 / 8 (5 seeds) | 92 / 33 (5 seeds) |" in table
    layout = table_1_rows(cells)
    assert [(r.base, r.setup, r.seeds, r.here[:2]) for r in layout] == [
        ("qplex", "", ((5, 5),), (0.08, 0.33)), ("qplex", "preset=authors-smac", ((2, 1),), (0.02, 0.59))]
    assert "| qplex preset=authors-smac, 0.5M | smax: 3s5z (2 / 1) | 2 -> 59 | 80 -> 92 | 58 -> 63 |" in \
        table_1_markdown(layout)


def test_report_names_a_preset_once_and_sets_its_runs_beside_the_paper(tmp_path):
    root = tmp_path / "runs"
    for seed in (0, 1):
        write_run(root, "smax:3s5z", "qplex", seed, {250_000: 0.1, 500_000: 0.2})
        write_run(root, "smax:3s5z", "sem-qplex", seed, {250_000: 0.3, 500_000: 0.4})
        write_run(root, "smax:3s5z", "qplex", seed, {250_000: 0.0, 500_000: 0.0}, preset="authors-smac")
        write_run(root, "smax:3s5z", "sem-qplex", seed, {250_000: 0.5, 500_000: 0.6}, preset="authors-smac")
    result = report(root, at=[250_000, 500_000], reps=REPS, out=tmp_path / "report")
    assert "updates_per_episode" not in result.markdown  # the preset's eight fields are named by the preset
    assert "| smax:3s5z | 1.000 [1.000, 1.000] | sem-qplex preset=authors-smac | qplex preset=authors-smac | 2 / 2 |" \
        in result.markdown
    assert ("| smax:3s5z, 0.5M | qplex preset=authors-smac | 80 / 0 (2 seeds) | 92 / 60 (2 seeds) | "
            "SEM ahead / SEM ahead |") in result.markdown
    assert [(r.base, r.setup, r.step) for r in result.table_1] == [
        ("qplex", "", 250_000), ("qplex", "preset=authors-smac", 250_000),
        ("qplex", "", 500_000), ("qplex", "preset=authors-smac", 500_000)]
