"""docs/architecture.md's "Extending semzoo" table against the code: the files it says a new mixer or memory with
settings touches are where the built-in ones are registered and their settings declared."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from semzoo.config import registered_components
from semzoo.episodic import memory as memory_registry
from semzoo.episodic.settings import MEMORY_SETTINGS
from semzoo.mixers import registry as mixer_registry
from semzoo.mixers.settings import MIXER_SETTINGS

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def table_row(extension: str) -> str:
    """The row of the extension table (its rows count files) that starts with ``| <extension>``."""
    rows = [line for line in PAGE.splitlines() if line.startswith(f"| {extension} | 1 (a plugin module")]
    assert len(rows) == 1, f"docs/architecture.md has {len(rows)} rows for {extension!r}"
    return rows[0]


@pytest.mark.parametrize(("extension", "names"), [
    ("a mixer", ["mixers/<name>.py", "`_BUILTIN` of `mixers/registry.py`", "mixers/settings.py", "MIXER_SETTINGS"]),
    ("an episodic memory (EMC, EMU, a SEM variant, ...)",
     ["episodic/<name>.py", "`_BUILTIN` of `episodic/memory.py`", "episodic/settings.py", "MEMORY_SETTINGS"]),
])
def test_the_table_names_the_files_a_built_in_component_with_settings_touches(extension, names):
    row = table_row(extension)  # a plugin's: one file (tests/test_component_settings.py trains one)
    for name in names:
        assert name in row, f"{extension!r}: the row does not name {name}"


def test_each_built_in_mixer_is_its_module_in_the_registry_and_its_settings_in_mixer_settings():
    for name, module in mixer_registry._BUILTIN.items():
        builder = mixer_registry.mixer_class(name)
        assert builder.__module__ == module == f"semzoo.mixers.{name}"
    components = registered_components()
    for section, (settings, _users) in MIXER_SETTINGS.items():
        assert components[section].kind == "mixer" and components[section].settings is settings
        assert settings.__module__ == "semzoo.mixers.settings"
    # a mixer with settings of its own registers them beside its class (the same dataclass: a no-op there)
    for name in set(MIXER_SETTINGS) & set(mixer_registry._BUILTIN):
        source = Path(importlib.import_module(mixer_registry._BUILTIN[name]).__file__ or "").read_text()
        assert f'@register_mixer("{name}", settings={MIXER_SETTINGS[name][0].__name__})' in source


def test_each_built_in_memory_is_its_module_in_the_registry_and_its_settings_in_memory_settings():
    for name, module in memory_registry._BUILTIN.items():
        assert memory_registry.memory_class(name).__module__ == module
    components = registered_components()
    for section, (settings, users) in MEMORY_SETTINGS.items():
        assert components[section].kind == "memory" and components[section].settings is settings
        assert settings.__module__ == "semzoo.episodic.settings"
        assert set(users) <= set(memory_registry._BUILTIN)
