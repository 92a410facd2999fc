"""The Mixer contract and the registry of mixers by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from semzoo.config import MixerConfig, register_settings, registered_components
from semzoo.plugins import check_free
from semzoo.types import StateLayout


class Mixer(nn.Module):
    """Q_tot = mix(Q_a, s): checks shapes once, then calls ``mix``.

    forward(agent_qs [B,T,A], state [B,T,S], **extra) -> q_tot [B,T,1]. ``extra`` carries what
    some mixers need beyond that (QPLEX: ``actions_onehot`` [B,T,A,U] and ``max_qs`` [B,T,A]);
    every mixer accepts and ignores what it does not use, so the learner calls them all alike.
    """

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int) -> None:
        super().__init__()
        self.n_agents, self.state_dim, self.n_actions = n_agents, state_dim, n_actions

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        if agent_qs.dim() != 3 or agent_qs.shape[-1] != self.n_agents:
            raise ValueError(
                f"agent_qs has shape {tuple(agent_qs.shape)}: expected [B, T, {self.n_agents}] (batch, time, agents)"
            )
        expected_state = (*agent_qs.shape[:2], self.state_dim)
        if tuple(state.shape) != expected_state:
            raise ValueError(f"state has shape {tuple(state.shape)}: expected {expected_state} to match agent_qs")
        q_tot = self.mix(agent_qs, state, **extra)
        # A shape compare per call, nothing more: a [B,T] q_tot would broadcast against the [B,T,1] targets
        # into a [B,T,B] loss (on a one-step game [B,B]) and train on nonsense without a word.
        if not isinstance(q_tot, torch.Tensor) or q_tot.shape != (*agent_qs.shape[:2], 1) or \
                not q_tot.is_floating_point():
            raise ValueError(self._bad_output(q_tot, (*agent_qs.shape[:2], 1)))
        return q_tot

    def _bad_output(self, q_tot: object, expected: tuple[int, ...]) -> str:
        """The one line for a ``mix`` result that breaks the contract."""
        name = _registered_name(type(self))
        who = f"mixer {type(self).__name__}" + (f" (registered as {name!r})" if name else "")
        got = (f"a tensor of shape {tuple(q_tot.shape)} and dtype {q_tot.dtype}" if isinstance(q_tot, torch.Tensor)
               else f"a {type(q_tot).__name__}")
        return (f"{who}: mix() returned {got}; expected a floating-point tensor of shape [B, T, 1] = {expected} "
                "(one Q_tot per batch entry and time step): reduce over the agent axis with keepdim=True, "
                "e.g. agent_qs_BTA.sum(dim=-1, keepdim=True)")

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int, config: MixerConfig) -> Mixer:
        """Build from the env sizes and the mixer section; mixers with sizes of their own override this."""
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def regularizer(self, state_BTS: torch.Tensor, rows_T: torch.Tensor) -> torch.Tensor | None:
        """A term of the mixer's own that the learner adds to the loss (a 0-d tensor), or None: none here.

        state [B,T,S] of the batch's steps; ``rows_T`` marks the time rows up to the batch's longest episode.
        """
        return None


MixerBuilder = type[Mixer]
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
        if not (isinstance(builder, type) and issubclass(builder, Mixer)):
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


def _registered_name(builder: type) -> str | None:
    """The name ``builder`` is registered under, if any (for error messages)."""
    return next((name for name, registered in _REGISTRY.items() if registered is builder), None)


def mixer_names() -> list[str]:
    _import_builtin()
    return sorted(_REGISTRY)


def make_mixer(name: str, *, n_agents: int, state_dim: int, n_actions: int, config: MixerConfig,
               state_layout: StateLayout | None = None, settings: Any = None) -> Mixer:
    """Build the mixer registered under ``name``; its class reads the fields of ``config`` it needs.

    ``state_layout``: the env's per-unit state layout, passed to the mixers whose class sets
    ``reads_state_layout = True`` (their ``from_config`` takes it). ``settings``: the mixer's own settings, for a
    mixer registered with a settings dataclass (passed to its ``from_config`` as ``settings=``; its defaults when
    None).
    """
    _import_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown mixer {name!r}: expected one of {', '.join(sorted(_REGISTRY))}")
    builder = _REGISTRY[name]
    extra: dict[str, Any] = {"state_layout": state_layout} if getattr(builder, "reads_state_layout", False) else {}
    own = registered_components().get(name)
    if own is not None and own.kind == "mixer":
        extra["settings"] = settings if settings is not None else own.settings()
    return builder.from_config(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, config=config, **extra)


def _import_builtin() -> None:
    # Importing the modules runs their @register_mixer decorators.
    import importlib

    for module in ("vdn", "qmix", "qplex"):
        try:
            importlib.import_module(f"semzoo.mixers.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"semzoo.mixers.{module}":
                raise
