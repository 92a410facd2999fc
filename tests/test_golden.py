"""Behaviour is kept: every algorithm id, trained briefly with a fixed seed, logs the recorded metric rows.

The rows (tests/golden/metrics.json) are recorded by `tests/golden_runs.py`, each run trained in a
subprocess in float64 on pinned numeric paths (``golden_runs.PINNED_ENV``: ATen's default kernels, MKL's
COMPATIBLE mode, XLA at SSE4.2, one thread), so that they hold on every x86-64 CPU whatever its vector units
and vendor; that module's docstring says why, with the measured noise (about 1e-11 in float64). Env steps, episodes, updates and metric names
must match exactly, values to 1e-6 relative. ``SEMZOO_GOLDEN_ISA`` (default, avx2, avx512, native) sets the
children's ATen kernels; each test checks its child ran the kernels asked for and records them, and the session
ends with a line naming them (tests/conftest.py). The second half of this file shows that the check still
catches small changes of learning.
"""

from __future__ import annotations

import json

import pytest
from golden_runs import (
    ALGOS,
    ENVS,
    GOLDEN_FILE,
    ISA_ENV,
    golden_rows,
    golden_run,
    isa_capability,
    isa_unavailable,
    mismatch,
    pinning_unavailable,
    requested_isa,
)

GOLDEN = json.loads(GOLDEN_FILE.read_text())

pytestmark = pytest.mark.skipif(pinning_unavailable() is not None, reason=str(pinning_unavailable()))


def _cases():
    for env in ENVS:
        smax = env.startswith("smax:")
        marks = [pytest.mark.smax] if smax else []
        for algo in ALGOS:
            # SMAX rows take 30-45 s each: make test keeps the default algorithm's, make test-slow checks the rest
            slow = [pytest.mark.slow] if smax and algo != "sem-qmix" else []
            yield pytest.param(env, algo, marks=marks + slow, id=f"{env}|{algo}")


@pytest.fixture(scope="session")
def golden_isa() -> str:
    """The ATen capability the golden children are asked to run (``SEMZOO_GOLDEN_ISA``); skips where the CPU lacks it."""
    isa = requested_isa()
    why = isa_unavailable(isa)
    if why is not None:
        pytest.skip(f"{ISA_ENV}={isa}: {why}")
    return isa_capability(isa)


@pytest.mark.parametrize(("env", "algo"), list(_cases()))
def test_seeded_run_logs_the_recorded_metric_rows(env, algo, tmp_path, golden_isa, record_property):
    if env.startswith("smax:"):
        pytest.importorskip("jaxmarl")
    rows, isa = golden_run(env, algo, tmp_path)
    record_property("golden_isa", isa)  # tests/conftest.py sums these up at the end of the session
    assert isa == golden_isa, f"the golden child ran under {isa}, not the {golden_isa} that {ISA_ENV} asks for"
    assert mismatch(rows, GOLDEN[f"{env}|{algo}"]) is None, mismatch(rows, GOLDEN[f"{env}|{algo}"])


# Small changes of learning, each of which a refactor could make by mistake: the golden check must fail.
LEARNING_CHANGES = {
    "learning rate 0.1 % higher": ("matrix:climbing", "qmix", {"learner": {"lr": 5e-3 * 1.001}}),
    "learning rate 0.1 % lower, with memory": ("matrix:two_step", "sem-vdn", {"learner": {"lr": 5e-3 * 0.999}}),
    "gamma 0.98": ("matrix:two_step", "qmix", {"learner": {"gamma": 0.98}}),
    # on the two-step game: the climbing game's one step has no bootstrap, so its target network changes nothing
    "target update one episode late": ("matrix:two_step", "sem-qplex", {"learner": {"target_update_episodes": 9}}),
    "miss rule flipped": ("matrix:two_step", "sem-qmix", {"memory": {"miss_rule": "zero"}}),
    # a default the golden runs inherit (tests/test_defaults.py pins the ones they override)
    "RMSprop alpha 0.1 % higher": ("matrix:climbing", "qmix", {"learner": {"rms_alpha": 0.99 * 1.001}}),
}


@pytest.mark.parametrize("change", list(LEARNING_CHANGES))
def test_golden_check_fails_on_a_small_change_of_learning(change, tmp_path):
    env, algo, changes = LEARNING_CHANGES[change]
    rows = golden_rows(env, algo, tmp_path, changes=changes)
    assert mismatch(rows, GOLDEN[f"{env}|{algo}"]) is not None, f"{change}: the golden rows did not notice"


def test_mismatch_names_the_first_difference():
    rows = [[10, 1, 0, "loss", 1.0], [20, 2, 1, "loss", 0.5]]
    assert mismatch(rows, [list(r) for r in rows]) is None
    assert mismatch(rows, [rows[0], [20, 2, 1, "loss", 0.5 * (1 + 1e-7)]]) is None  # a reordered sum
    assert "0.5 != 0.5001" in str(mismatch(rows, [rows[0], [20, 2, 1, "loss", 0.5001]]))
    assert "row 1" in str(mismatch(rows, [rows[0], [20, 2, 2, "loss", 0.5]]))
    assert "1 recorded" in str(mismatch(rows, rows[:1]))
