"""The layers of semzoo: no import circle among its modules, a ground floor that imports nothing of semzoo, the
config on it and the plugins alone, a memory contract below the learners, and an analysis half that loads no torch.

The import graph is read from the source with ``ast``. An edge is every import statement of a module, wherever it
stands: at the top, inside a function (a deferred import) or under ``if TYPE_CHECKING:``; a reader learning the
layers bottom-up meets them all. ``from semzoo.a import b`` is an edge to ``semzoo.a.b`` when that is a module,
else to ``semzoo.a``; a package's ``__init__`` that runs on the way is not an edge (``semzoo/__init__.py`` imports
its public names lazily).
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"semzoo": ROOT / "semzoo", "semzoo.envs": ROOT / "envs", "semzoo.wrappers": ROOT / "wrappers"}
"""Installed package -> its folder (pyproject.toml maps envs/ and wrappers/ into semzoo)."""
GROUND_FLOOR = ("semzoo.settings", "semzoo.types", "semzoo.errors")
CONFIG_MAY_IMPORT = {"semzoo.settings", "semzoo.plugins", "semzoo.episodic.settings", "semzoo.mixers.settings"}
"""The config stands on the ground floor's settings helpers, on the plugins (the registries' one rule, and the
plugins a stored config of a plugin's component needs) and on the built-in memories' and mixers' settings
(torch-free dataclasses on the settings helpers alone), which it registers as components."""
ANALYSIS_MAY_IMPORT = ("semzoo.analysis", "semzoo.config", "semzoo.errors", "semzoo.runfiles", "semzoo.plugins",
                       "semzoo.episodic.memory", "semzoo.presets")
"""The analysis of finished runs reads run directories, the memory registry's names and the presets' fields (a
report names a preset run by its preset); none of these loads torch when imported. (Reading the config of a preset
run reads the algorithm table, as ``TrainConfig`` resolving the preset always did.)"""


@cache
def modules() -> dict[str, Path]:
    """Every module of semzoo by its dotted name (packages by their own name), from the source tree."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _module_of(name: str) -> str | None:
    """The longest prefix of the dotted ``name`` that is a semzoo module."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports() -> dict[str, dict[str, int]]:
    """Module -> {semzoo module it imports: line of the first such import}, every import statement counted."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules().items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package up
                    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base
                           for alias in node.names]
            for target in targets:
                if target == "semzoo" or target.startswith("semzoo."):
                    found = _module_of(target)
                    if found is not None and found != module:
                        edges.setdefault(found, node.lineno)
        graph[module] = edges
    return graph


def _where(module: str, target: str) -> str:
    return f"{modules()[module].relative_to(ROOT)}:{imports()[module][target]}"


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle [a, b, ..., a] of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, {})):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_the_graph_sees_the_whole_package():
    names = modules()
    assert {"semzoo.config", "semzoo.run.trainer", "semzoo.envs.smax", "semzoo.wrappers.ctde",
            "semzoo.analysis.protocol"} <= set(names)
    assert "semzoo.episodic.memory" in imports()["semzoo.learners.q_learner"]


def test_find_cycle_names_an_import_circle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_no_import_circle_among_semzoo_modules():
    cycle = find_cycle(imports())
    assert cycle is None, "import circle: " + " -> ".join(
        f"{a} ({_where(a, b)})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"


def test_every_import_of_semzoo_names_a_module_that_exists():
    """A stale path (a module moved or removed) is an error here, not an Any that mypy lets through."""
    stale = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("semzoo"):
                if node.module not in modules():
                    stale.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                stale += [f"{path.relative_to(ROOT)}:{node.lineno}: import {alias.name}" for alias in node.names
                          if alias.name.startswith("semzoo") and alias.name not in modules()]
    assert stale == []


@pytest.mark.parametrize("module", GROUND_FLOOR)
def test_the_ground_floor_imports_no_other_semzoo_module(module):
    assert imports()[module] == {}, f"{module} imports " + ", ".join(
        f"{target} ({_where(module, target)})" for target in imports()[module])


def test_the_config_imports_only_the_settings_helpers_the_plugins_and_the_memories_settings():
    assert set(imports()["semzoo.config"]) == CONFIG_MAY_IMPORT
    assert set(imports()["semzoo.plugins"]) == {"semzoo.errors"}
    assert set(imports()["semzoo.episodic.settings"]) == {"semzoo.settings"}
    assert set(imports()["semzoo.mixers.settings"]) == {"semzoo.settings"}


def test_the_memory_contract_and_the_memories_import_no_learner():
    episodic = [m for m in modules() if m.startswith("semzoo.episodic")]
    upward = [f"{m} -> {t} ({_where(m, t)})" for m in episodic for t in imports()[m]
              if t.startswith(("semzoo.learners", "semzoo.algos"))]
    assert upward == []


def test_the_analysis_imports_nothing_of_the_training_stack():
    """Its modules and the run-directory readers import only each other, the ground floor and the memory registry
    (whose module imports torch for type annotations only: the subprocess tests below load it)."""
    analysis = [m for m in modules() if m.startswith("semzoo.analysis")] + ["semzoo.runfiles"]
    assert {"semzoo.analysis.report", "semzoo.analysis.protocol", "semzoo.analysis.paper"} <= set(analysis)
    beyond = [f"{m} -> {t} ({_where(m, t)})" for m in analysis for t in imports()[m]
              if not t.startswith(ANALYSIS_MAY_IMPORT)]
    assert beyond == []


ANALYSIS_MODULES = sorted(m for m in modules() if m.startswith("semzoo.analysis."))
"""The analysis package's modules (report, protocol, statistics, ...), read from the source tree."""


@pytest.mark.parametrize("module", ["semzoo", "semzoo.analysis", *ANALYSIS_MODULES, "semzoo.runfiles",
                                    *GROUND_FLOOR[:1], "semzoo.errors"])
def test_importing_the_analysis_loads_no_torch(module):
    code = f"import sys, {module}; assert 'torch' not in sys.modules, 'torch was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_public_names_still_import_from_semzoo():
    done = subprocess.run([sys.executable, "-c", "from semzoo import train, TrainConfig, register_env, Memory; "
                           "import semzoo; assert semzoo.train is train and 'train' in dir(semzoo); print(train.__module__)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "semzoo.run.trainer"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import semzoo

        semzoo.nope  # noqa: B018


def test_the_builtin_memory_names_known_without_import_are_the_registered_ones():
    """``memory_of`` reads the built-in names from ``episodic.memory._BUILTIN``; each module must register them."""
    import importlib

    from semzoo.episodic import memory

    for name, module in memory._BUILTIN.items():
        importlib.import_module(module)
        assert memory.memory_class(name).__module__ == module
    assert set(memory._BUILTIN) == {n for n in memory.memory_names() if memory.memory_class(n).__module__ in
                                    set(memory._BUILTIN.values())}
    assert (memory.memory_of("sem-qmix"), memory.memory_of("cw-qmix"), memory.memory_of("qmix")) == ("sem", "none", "none")
