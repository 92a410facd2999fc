"""The registry of mixers by name; it loads no torch, so the algorithm table and `semzoo algos` read the names of
the mixers without importing them (a built-in mixer's module is imported when it is built or registered over)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from semzoo.config import register_settings, registered_components
from semzoo.plugins import check_free

if TYPE_CHECKING:
    from semzoo.types import StateLayout

MixerBuilder = type[Any]
"""A subclass of ``semzoo.mixers.base.Mixer`` (not imported here: its module loads torch)."""
_BUILTIN = {"vdn": "semzoo.mixers.vdn", "qmix": "semzoo.mixers.qmix", "qplex": "semzoo.mixers.qplex"}
"""The built-in mixers by name, and the module whose import registers each (its ``@register_mixer``)."""
_REGISTRY: dict[str, MixerBuilder] = {}


def register_mixer(name: str, *, settings: type | None = None,
                   replace: bool = False) -> Callable[[MixerBuilder], MixerBuilder]:
    """Class decorator: make a mixer available as ``make_mixer(name, ...)`` and as algorithm ids
    ``name``, ``sem-name`` and ``saem-name`` (see semzoo.algos).

    ``settings``: a frozen dataclass of the mixer's own settings (fields with defaults): every config of an id on
    this mixer holds them as its section ``name``, passed to ``from_config`` as ``settings=`` (``--set
    name.<field>=VALUE`` sets one, config.json stores them).

    The registries' one rule (``semzoo.plugins.check_free``): registering the same class again is a no-op,
    another class under a taken name is a ValueError unless ``replace=True``.
    """
    if not isinstance(name, str) or not name or name.strip() != name:
        raise ValueError(f"mixer name {name!r}: expected a non-empty string without surrounding spaces")

    def decorate(builder: MixerBuilder) -> MixerBuilder:
        base = sys.modules.get("semzoo.mixers.base")  # loaded: a Mixer subclass was defined
        if not (isinstance(builder, type) and base is not None and issubclass(builder, base.Mixer)):
            raise TypeError(f"register_mixer({name!r}) got {builder!r}: expected a subclass of semzoo.Mixer "
                            "that implements mix(agent_qs [B,T,A], state [B,T,S]) -> [B,T,1]")
        if not builder.__module__.startswith(f"{__package__}."):
            _import_builtin()  # a user's class must not take a built-in name that is only imported later
        check_free("mixer", name, builder, _REGISTRY, replace=replace)
        if settings is not None:
            register_settings("mixer", name, settings, replace=replace)
        _REGISTRY[name] = builder
        return builder

    return decorate


def registered_name(builder: type) -> str | None:
    """The name ``builder`` is registered under, if any (for error messages)."""
    return next((name for name, registered in _REGISTRY.items() if registered is builder), None)


def mixer_names() -> list[str]:
    """The built-in and the registered mixers' names, sorted; imports no mixer."""
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def mixer_class(name: str) -> MixerBuilder:
    """The class registered as ``name`` (a built-in one imported now); ValueError naming the known ones otherwise."""
    if name in _BUILTIN and name not in _REGISTRY:
        importlib.import_module(_BUILTIN[name])
    if name not in _REGISTRY:
        raise ValueError(f"unknown mixer {name!r}: expected one of {', '.join(mixer_names())}")
    return _REGISTRY[name]


def make_mixer(name: str, *, n_agents: int, state_dim: int, n_actions: int,
               state_layout: StateLayout | None = None, settings: Any = None) -> Any:
    """Build the mixer registered under ``name`` from the env's sizes and its own settings.

    ``state_layout``: the env's per-unit state layout, passed to the mixers whose class sets
    ``reads_state_layout = True`` (their ``from_config`` takes it). ``settings``: the mixer's own settings, for a
    mixer registered with a settings dataclass (QMIX's, QPLEX's, a plugin's; passed to its ``from_config`` as
    ``settings=``, its defaults when None).
    """
    builder = mixer_class(name)
    extra: dict[str, Any] = {"state_layout": state_layout} if getattr(builder, "reads_state_layout", False) else {}
    own = registered_components().get(name)
    if own is not None and own.kind == "mixer":
        extra["settings"] = settings if settings is not None else own.settings()
    return builder.from_config(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, **extra)


def _import_builtin() -> None:
    """Import every built-in mixer's module (its ``@register_mixer`` runs)."""
    for module in _BUILTIN.values():
        importlib.import_module(module)
