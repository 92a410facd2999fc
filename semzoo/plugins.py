"""Plugins: user modules that register mixers, algorithms or environments before an id is looked up.

A plugin is any importable module whose import registers things (``semzoo.register_mixer``,
``semzoo.register_algorithm``, ...). semzoo imports, once per process:

- every module named in the environment variable ``SEMZOO_PLUGINS`` (comma-separated), which the
  CLI's ``--plugin MODULE`` option sets, so Ray workers of a sweep import them too;
- every entry point of the group ``semzoo.plugins`` of the installed packages, e.g. in a
  package's pyproject.toml: ``[project.entry-points."semzoo.plugins"] mine = "mypkg.semzoo_plugin"``.

The registries (mixers, algorithms, envs) follow one rule, ``check_free``: registering the same object
under a name again is a no-op (a plugin imported twice), another object under a taken name is a
ValueError unless the call passes ``replace=True``.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from semzoo.errors import MissingDependency

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
    """Import the plugins not imported yet (cheap after the first call: the installed packages' entry points are
    read once per process)."""
    for module in plugin_modules():
        _import(module)
    for ep in _entry_points():
        key = f"entry point {ep.name}={ep.value}"
        if key not in _loaded:
            _loaded.add(key)
            try:
                ep.load()
            except ImportError as err:
                raise MissingDependency(f"plugin {key} cannot be imported ({err}): reinstall the package that "
                                        "declares it, or uninstall it") from None
            except (ValueError, TypeError) as err:  # a registration refused: say which plugin made it
                raise type(err)(f"plugin {key}: {err}") from None


@functools.cache
def _entry_points() -> tuple[Any, ...]:
    """The group's entry points of the installed packages (reading them scans the metadata of every package)."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def _import(module: str) -> None:
    if module in _loaded:
        return
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise MissingDependency(f"plugin module {module!r} cannot be imported ({err}): put it on PYTHONPATH or "
                                f"install it, or remove it from --plugin / {PLUGINS_ENV}") from None
    except (ValueError, TypeError) as err:  # a registration refused: say which plugin made it
        raise type(err)(f"plugin module {module!r}: {err}") from None
    _loaded.add(module)


def check_free(kind: str, name: str, obj: Any, registry: Mapping[str, Any], *, replace: bool) -> None:
    """ValueError when ``name`` is taken in ``registry`` by another object than ``obj`` and not ``replace``.

    "The same object" is identity, equality (two equal ``Algorithm`` rows), or a class or function of the same
    module and qualified name (its module was imported again, e.g. reloaded), which replaces the old one.
    """
    taken = registry.get(name)
    if taken is None or replace or taken is obj or _same_definition(taken, obj):
        return
    raise ValueError(f"{kind} name {name!r} is already registered to {_describe(taken)}; pick another name, or "
                     f"pass replace=True to replace it with {_describe(obj)}")


def _same_definition(a: Any, b: Any) -> bool:
    if isinstance(a, type) or (callable(a) and hasattr(a, "__qualname__")):
        key = (getattr(a, "__module__", None), getattr(a, "__qualname__", None))
        return "<lambda>" not in str(key[1]) and key == (getattr(b, "__module__", None), getattr(b, "__qualname__", None))
    try:
        return bool(a == b)
    except Exception:  # an object whose == does not return a bool (arrays): not the same
        return False


def _describe(obj: Any) -> str:
    qualname = getattr(obj, "__qualname__", None)
    return f"{obj.__module__}.{qualname}" if qualname and hasattr(obj, "__module__") else repr(obj)
