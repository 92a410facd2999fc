"""Shared fixtures: small, fast configurations."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from semzoo.config import TrainConfig
from semzoo.resolution import resolve

torch.set_num_threads(1)  # tests run in parallel on 2 cores; one thread each avoids oversubscription

PLAN_LINE = re.compile(r"^(sweep: trial \S+ \S+: )?memory plan: \(replay buffer .* available; [0-9.]+ updates?/episode$")
"""The memory plan's line that ``semzoo train`` and ``sweep`` print before they allocate (informational)."""


PROGRESS_LINE = re.compile(r"^\[train( x\d+)?\] ")
"""A progress line of a run (``[train] 1/100 steps ...``): a run that fails in its first update has printed one."""


def resolved_config(**fields: Any) -> TrainConfig:
    """``TrainConfig(**fields)`` as a run resolves it (``semzoo.resolution``: its runtime and preset applied), which is
    what a run's config.json stores."""
    return resolve(TrainConfig(**fields)).config


def error_lines(text: str) -> list[str]:
    """The lines of a command's stderr after its memory plan's line, which comes first where it is printed, without
    the run's progress lines."""
    lines = text.strip().splitlines()
    lines = lines[1:] if lines and PLAN_LINE.match(lines[0]) else lines
    return [line for line in lines if not PROGRESS_LINE.match(line)]


NO_ACTOR = {"sequential": True}
"""Config fields for a test that trains a run but does not test the training loop: the sequential loop
(collect, then learn) starts no actor process, which the default overlapped loop does (2 s for a matrix
game, 12-20 s for SMAX) and then keeps busy on a second core. Tests of the overlapped loop itself
(test_overlap, test_actor, the overlapped cases of test_checkpoint and test_evaluate, test_kill_resume and
the CLI's test_short_train_run_writes_metrics) keep the default."""
NO_ACTOR_FLAGS = ("--sequential",)
"""``NO_ACTOR`` as `semzoo train` flags."""


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


def record_losses(trainer) -> list[float]:
    """A list that receives the loss of every gradient step ``trainer`` takes from now on."""
    losses: list[float] = []
    train_step = trainer.learner.train

    def recording(batch):
        stats = train_step(batch)
        losses.append(stats["loss"])
        return stats

    trainer.learner.train = recording
    return losses


PLUGINS = Path(__file__).parent / "plugins"


def plugin_process_env() -> dict[str, str]:
    """The environment of a ``semzoo`` subprocess that imports the test plugins by name (and no others)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
    env.pop("SEMZOO_PLUGINS", None)
    return env
"""Plugin modules as users write them (``semzoo --plugin MODULE``)."""


@pytest.fixture
def fresh_registries(monkeypatch):
    """Copies of the mixer, algorithm and env registries and of the plugin state, put back after the test,
    with tests/plugins on sys.path: what a test registers (broken extensions on purpose) leaves no trace."""
    import semzoo.algos
    import semzoo.config
    import semzoo.mixers.registry
    import semzoo.plugins
    from semzoo.envs import registry

    semzoo.mixers.registry._import_builtin()  # registered into the real registry, not into the test's copy
    monkeypatch.setattr(semzoo.mixers.registry, "_REGISTRY", dict(semzoo.mixers.registry._REGISTRY))
    monkeypatch.setattr(semzoo.algos, "_TABLE", dict(semzoo.algos._TABLE))
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(semzoo.plugins, "_loaded", set(semzoo.plugins._loaded))
    monkeypatch.setattr(semzoo.plugins, "_origins", dict(semzoo.plugins._origins))
    monkeypatch.setattr(semzoo.config, "_COMPONENTS", dict(semzoo.config._COMPONENTS))
    monkeypatch.setenv(semzoo.plugins.PLUGINS_ENV, "")  # set, not deleted: monkeypatch restores only what it set
    monkeypatch.syspath_prepend(str(PLUGINS))
    plugin_modules = ("contract_breakers", "unknown_mixer_algorithm")  # the broken ones, used only here
    for name in plugin_modules:  # imported in the test, they register into its copies
        sys.modules.pop(name, None)
    yield
    for name in plugin_modules:  # and are gone after it: their registrations went with the copies
        sys.modules.pop(name, None)


def pytest_terminal_summary(terminalreporter):
    """One line with the ATen ISA each golden child ran under (test_golden.py records it as ``golden_isa``),
    printed by ``pytest -q`` too, so that a log shows which kernels the golden rows were checked on."""
    isas = Counter(value for reports in terminalreporter.stats.values() for report in reports
                   if getattr(report, "when", None) == "call"
                   for name, value in getattr(report, "user_properties", ()) if name == "golden_isa")
    if isas:
        requested = os.environ.get("SEMZOO_GOLDEN_ISA", "default")
        counts = ", ".join(f"{isa} x{n}" for isa, n in sorted(isas.items()))
        terminalreporter.write_line(f"golden children ran under ISA: {counts} (SEMZOO_GOLDEN_ISA={requested})")
