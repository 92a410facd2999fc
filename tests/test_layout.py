"""The package's layout: one concept per module, so no module grows past what a reader takes in at once, and the
names that moved with a split still import from where users and the docs import them."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 700
"""The most lines a module may hold: past this it holds more than one concept, and is split by concept."""
SPLIT_DIRS = ("semzoo", "envs", "wrappers")
"""The folders held to ``MAX_LINES``."""
MODULES = sorted(path for folder in SPLIT_DIRS for path in (ROOT / folder).rglob("*.py"))

MOVED = {
    "semzoo.episodic.tables": ("SEMTable", "SAEMTable", "EpisodicMemory", "make_episodic_memory", "discounted_returns",
                               "project_fixed_order", "TableUsage", "LFUKeyTable", "BUCKET_SLOTS", "MISS_VALUE",
                               "ACTION_ID_LIMIT", "MAX_CAPACITY", "n_buckets_for", "table_nbytes", "projection_bytes",
                               "semzoo_storage_bytes", "table_class", "check_table_sizes", "DEFAULT_CAPACITY",
                               "PAPER_PROJ_DIM"),
    "semzoo.episodic.nearest": ("NearestIndex", "Nearest", "Tolerance", "AllClose", "ZBox", "EvictionPolicy",
                                "LeastRecentlyUsed", "EMC_ATOL", "EMC_RTOL", "EMU_DELTA", "EMU_DELTA_SUPER_HARD"),
    "semzoo.analysis.protocol": ("report", "parse_compare", "Report", "aggregates", "improvements", "bootstrap",
                                 "iqm_curve", "metric_at", "read_absolute", "compared_pairs", "memory_pairs",
                                 "setting_pairs", "sensitivities", "Sensitivity", "plot_sensitivity", "wall_costs",
                                 "WallCost", "memory_use", "MemoryUse", "derived_merge_rate", "SELF_HIT_LIMIT",
                                 "marl_eval_data", "env_and_task", "plot_performance_profiles",
                                 "plot_sample_efficiency", "ALL_ENVS", "ABSOLUTE_FILE", "MARL_EVAL_FILE",
                                 "REPORT_FILE", "PROFILE_FILE", "CURVES_FILE"),
    "semzoo.envs.smax": ("SMAXEnv", "SMAXVecEnv", "parallel_env", "available_maps", "check_run_env_args",
                         "resolve_options", "REWARDS", "DEATH_VALUE", "WIN_VALUE", "NEGATIVE_SCALE", "SCALE_RATE",
                         "FIXED_START_SEED"),
}
"""Module -> the public names it held before its split, still importable from it (``semzoo.cli`` and the docs
import some of them from there)."""


def test_the_layout_sees_the_split_folders():
    names = {path.relative_to(ROOT).as_posix() for path in MODULES}
    assert {"semzoo/episodic/sem.py", "semzoo/episodic/hash_table.py", "semzoo/analysis/protocol.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_module_is_over_700_lines(path):
    n_lines = len(path.read_text().splitlines())
    assert n_lines <= MAX_LINES, (
        f"{path.relative_to(ROOT)} has {n_lines} lines, more than {MAX_LINES}: split it by concept into modules "
        "named for what they hold, and update docs/architecture.md's layout")


@pytest.mark.parametrize("module", sorted(MOVED))
def test_names_that_moved_still_import_from_their_first_module(module):
    loaded = importlib.import_module(module)
    missing = [name for name in MOVED[module] if not hasattr(loaded, name)]
    assert missing == [], f"{module} no longer exports {missing}; re-export them from their new homes"


def test_sem_and_saem_are_found_by_name():
    from semzoo.episodic.memory import memory_class

    assert memory_class("sem").__module__ == "semzoo.episodic.sem"
    assert memory_class("saem").__module__ == "semzoo.episodic.sem"
    assert memory_class("mc").__module__ == "semzoo.episodic.own_return"
