"""The paper's numbers beside a recomputed score table: which cells compare, and what ``semzoo report`` writes."""

from __future__ import annotations

import math

import pytest
from test_protocol import REPS, write_run

from semzoo.run.paper import PAPER_WIN_RATE, direction, paper_cells, paper_markdown
from semzoo.run.protocol import report
from semzoo.run.report import TableRow


def test_the_paper_tables_are_transcribed_cell_by_cell():
    # Spot checks across both appendix tables, both halves (first four maps, last four) and all four bases.
    assert PAPER_WIN_RATE[("2s3z", "qplex", 500_000)] == 0.98
    assert PAPER_WIN_RATE[("3s5z", "sem-cw-qmix", 250_000)] == 0.63
    assert PAPER_WIN_RATE[("27m_vs_30m", "sem-vdn", 500_000)] == 0.01
    assert PAPER_WIN_RATE[("MMM2", "sem-cw-qmix", 250_000)] == 0.03
    assert PAPER_WIN_RATE[("bane_vs_bane", "qmix", 500_000)] == 0.24
    assert len(PAPER_WIN_RATE) == 2 * 8 * 8  # steps x algorithms x maps


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
    assert result.beside_paper == []
    assert "Beside the paper" not in result.markdown
