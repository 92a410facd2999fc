"""Plugins: user modules that register mixers, algorithms or environments before an id is looked up.

A plugin is any importable module whose import registers things (``semzoo.register_mixer``,
``semzoo.register_algorithm``, ...). semzoo imports, once per process:

- every module named in the environment variable ``SEMZOO_PLUGINS`` (comma-separated), which the
  CLI's ``--plugin MODULE`` option sets, so Ray workers of a sweep import them too;
- every entry point of the group ``semzoo.plugins`` of the installed packages, e.g. in a
  package's pyproject.toml: ``[project.entry-points."semzoo.plugins"] mine = "mypkg.semzoo_plugin"``.

A plugin is named by its module (``mypkg.semzoo_plugin``, imported from the path) or by its file (``./my_memory.py``,
imported as the module ``my_memory``). A module that fails to import, whatever it raises, is a ``MissingDependency``:
one line naming the module, the error and where it arose. What a plugin registers is remembered with the plugin
(``plugin_of``), so a run records which plugin its memory, mixer, algorithm or env came from.

The registries (mixers, algorithms, envs) follow one rule, ``check_free``: registering the same object
under a name again is a no-op (a plugin imported twice), another object under a taken name is a
ValueError unless the call passes ``replace=True``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from semzoo.errors import MissingDependency

PLUGINS_ENV = "SEMZOO_PLUGINS"
ENTRY_POINT_GROUP = "semzoo.plugins"

_loaded: set[str] = set()
_importing: list[str] = []
"""The plugins being imported now, innermost last: a registration made meanwhile is the last one's."""
_origins: dict[tuple[str, str], str] = {}
"""(kind, name) of a registration -> the plugin (as given to --plugin) whose import made it."""


def plugin_modules() -> list[str]:
    """The module names in ``SEMZOO_PLUGINS``, in order."""
    return [name.strip() for name in os.environ.get(PLUGINS_ENV, "").split(",") if name.strip()]


def add_plugin(module: str) -> None:
    """Import ``module`` now and name it in ``SEMZOO_PLUGINS`` so child processes (Ray workers) import it too; a
    file (``./my_memory.py``) is named by its absolute path, so a child in another folder finds it."""
    if is_plugin_file(module):
        module = str(Path(module).resolve())
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
            except Exception as err:  # the plugin's own code failed while it was imported
                raise MissingDependency(f"plugin {key} failed while importing: {_where(err)}; fix the package, or "
                                        "uninstall it") from None


@functools.cache
def _entry_points() -> tuple[Any, ...]:
    """The group's entry points of the installed packages (reading them scans the metadata of every package)."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def is_plugin_file(plugin: str) -> bool:
    """Whether ``plugin`` names a file (``./my_memory.py``, ``plugins/x.py``) rather than a module."""
    return plugin.endswith(".py") or os.sep in plugin or "/" in plugin


def module_name(plugin: str) -> str:
    """The module a plugin is imported as: its own name, or a file's name without ``.py`` (``my_memory``)."""
    return Path(plugin).stem if is_plugin_file(plugin) else plugin


def plugin_loaded(plugin: str) -> bool:
    """Whether ``plugin`` (a module name or file) is imported in this process, by semzoo or by the user's code."""
    return plugin in _loaded or module_name(plugin) in sys.modules


def plugin_of(kind: str, name: str) -> str | None:
    """The plugin whose import registered ``name`` as a ``kind`` (``"memory"``, ``"mixer"``, ``"algorithm"``,
    ``"env"``), as it was given (a module name, or a file's absolute path); None for semzoo's own and for a
    registration made outside a plugin's import."""
    return _origins.get((kind, name))


def _import(module: str) -> None:
    if module in _loaded:
        return
    _importing.append(module)
    try:
        if is_plugin_file(module):
            _import_file(module)
        else:
            importlib.import_module(module)
    except MissingDependency:
        raise
    except ImportError as err:
        raise MissingDependency(f"plugin module {module!r} cannot be imported ({err}): put it on PYTHONPATH or "
                                f"install it, or remove it from --plugin / {PLUGINS_ENV}") from None
    except (ValueError, TypeError) as err:  # a registration refused: say which plugin made it
        raise type(err)(f"plugin module {module!r}: {err}") from None
    except Exception as err:  # the plugin's own code failed while it was imported: one line, not a traceback
        what = "file" if is_plugin_file(module) else "module"
        raise MissingDependency(f"plugin {what} {module!r} failed while importing: {_where(err)}; fix it, or remove "
                                f"it from --plugin / {PLUGINS_ENV}") from None
    finally:
        _importing.pop()
    _loaded.add(module)


def _import_file(path: str) -> None:
    """Import the Python file ``path`` as the module named by its stem (``./my_memory.py`` -> ``my_memory``)."""
    file, name = Path(path), module_name(path)
    if not file.is_file():
        raise MissingDependency(f"plugin file {path!r} does not exist: give a Python file (--plugin ./my_memory.py) "
                                "or the name of a module on PYTHONPATH (--plugin my_memory)")
    existing = sys.modules.get(name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "") or "").resolve() == file.resolve():
            return
        raise MissingDependency(f"plugin file {path!r} would be imported as the module {name!r}, which is already "
                                f"{getattr(existing, '__file__', None) or 'a built-in module'}: rename the file")
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise MissingDependency(f"plugin file {path!r} cannot be imported as a Python module: give a .py file")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded  # as an import does: dataclasses and pickling find the module by its name
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise


def _where(err: BaseException) -> str:
    """'RuntimeError: boom (my_memory.py line 12)': the error and the last line of the plugin's code it passed."""
    frames = traceback.extract_tb(err.__traceback__)
    line = getattr(err, "lineno", None) if isinstance(err, SyntaxError) else None
    file = getattr(err, "filename", None) if isinstance(err, SyntaxError) else None
    if line is None and frames:
        outside = [frame for frame in frames if "importlib" not in frame.filename and "semzoo/plugins" not in
                   frame.filename.replace(os.sep, "/")]
        frame = (outside or frames)[-1]
        file, line = frame.filename, frame.lineno
    message = err.msg if isinstance(err, SyntaxError) and err.msg else str(err)
    text = message.strip().splitlines()[0] if message.strip() else ""
    at = f" ({file} line {line})" if file and line else ""
    return f"{type(err).__name__}{': ' + text if text else ''}{at}"


def check_free(kind: str, name: str, obj: Any, registry: Mapping[str, Any], *, replace: bool) -> None:
    """ValueError when ``name`` is taken in ``registry`` by another object than ``obj`` and not ``replace``.

    "The same object" is identity, equality (two equal ``Algorithm`` rows), or a class or function of the same
    module and qualified name (its module was imported again, e.g. reloaded), which replaces the old one.
    """
    if _importing:
        _origins[(kind, name)] = _importing[-1]
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
