"""Plugins: user modules that register mixers, algorithms or environments before an id is looked up.

A plugin is any importable module whose import registers things (``semzoo.register_mixer``,
``semzoo.register_algorithm``, ...). semzoo imports, once per process:

- every module named in the environment variable ``SEMZOO_PLUGINS`` (comma-separated), which the
  CLI's ``--plugin MODULE`` option sets, so Ray workers of a sweep import them too;
- every entry point of the group ``semzoo.plugins`` of the installed packages, e.g. in a
  package's pyproject.toml: ``[project.entry-points."semzoo.plugins"] mine = "mypkg.semzoo_plugin"``.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

PLUGINS_ENV = "SEMZOO_PLUGINS"
ENTRY_POINT_GROUP = "semzoo.plugins"

_loaded: set[str] = set()


def plugin_modules() -> list[str]:
    """The module names in ``SEMZOO_PLUGINS``, in order."""
    return [name.strip() for name in os.environ.get(PLUGINS_ENV, "").split(",") if name.strip()]


def add_plugin(module: str) -> None:
    """Import ``module`` now and name it in ``SEMZOO_PLUGINS`` so child processes (Ray workers) import it too."""
    _import(module)
    names = plugin_modules()
    if module not in names:
        os.environ[PLUGINS_ENV] = ",".join([*names, module])


def load_plugins() -> None:
    """Import the plugins not imported yet (cheap after the first call)."""
    for module in plugin_modules():
        _import(module)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"entry point {ep.name}={ep.value}"
        if key not in _loaded:
            _loaded.add(key)
            ep.load()


def _import(module: str) -> None:
    if module in _loaded:
        return
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"plugin module {module!r} cannot be imported ({err}): put it on PYTHONPATH or install "
                         f"it, or remove it from --plugin / {PLUGINS_ENV}") from None
    _loaded.add(module)
