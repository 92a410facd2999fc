"""The ``semzoo`` command line: thin wrappers that build a config and call the library.

Exit codes: 0 success, 1 domain error (bad run directory, environment failure, a missing optional part:
an extra, StarCraft II, a plugin module), 2 usage error (bad flag value). Errors are one line on stderr,
never a traceback.

One module per group of commands, each registered on ``app`` when imported (the order below is the order of
`semzoo --help`): training.py (train, evaluate, sweep), runs.py (plot, table, report), listing.py (algos, envs,
memory-cost); base.py holds the group and what they share, options.py `train`'s generated options. No module imports
torch at import time: the commands that train import the training stack when they run.
"""

from __future__ import annotations

import importlib

from semzoo.cli.base import DOMAIN_ERROR, USAGE_ERROR, app, fail, main, parse_env_args
from semzoo.cli.options import (
    CLI_ONLY_OPTIONS,
    FIELD_PANELS,
    OTHER_PANEL,
    PANEL_ORDER,
    RESUME_FLAGS,
    TRAIN_FIELDS,
    TRAIN_FLAGS,
    option_flags,
    panel_of,
    panel_rank,
    range_text,
)

COMMAND_MODULES = ("training", "runs", "listing")
"""The modules of the commands, imported in this order: the order of `semzoo --help`."""
for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")  # registers its commands on ``app``

__all__ = ["CLI_ONLY_OPTIONS", "DOMAIN_ERROR", "FIELD_PANELS", "OTHER_PANEL", "PANEL_ORDER", "RESUME_FLAGS",
           "TRAIN_FIELDS", "TRAIN_FLAGS", "USAGE_ERROR", "app", "fail", "main", "option_flags", "panel_of", "panel_rank",
           "parse_env_args", "range_text"]
