"""The Mixer contract: a mixing network Q_tot = f(agent Qs, state), its shape check and its own-loss hook."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# the registry, importable from here too (``X as X``: re-exported); its module loads no torch
from semzoo.mixers.registry import make_mixer as make_mixer
from semzoo.mixers.registry import mixer_names as mixer_names
from semzoo.mixers.registry import register_mixer as register_mixer
from semzoo.mixers.registry import registered_name


class Mixer(nn.Module):
    """Q_tot = mix(Q_a, s): checks shapes once, then calls ``mix``.

    forward(agent_qs [B,T,A], state [B,T,S], **extra) -> q_tot [B,T,1]. ``extra`` carries what
    some mixers need beyond that (QPLEX: ``actions_onehot`` [B,T,A,U] and ``max_qs`` [B,T,A]);
    every mixer accepts and ignores what it does not use, so the learner calls them all alike.
    """

    uses_actions: bool = False
    """True for a mixer that reads the joint action: the learner then passes ``actions_onehot`` and ``max_qs`` (QPLEX)."""

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
        name = registered_name(type(self))
        who = f"mixer {type(self).__name__}" + (f" (registered as {name!r})" if name else "")
        got = (f"a tensor of shape {tuple(q_tot.shape)} and dtype {q_tot.dtype}" if isinstance(q_tot, torch.Tensor)
               else f"a {type(q_tot).__name__}")
        return (f"{who}: mix() returned {got}; expected a floating-point tensor of shape [B, T, 1] = {expected} "
                "(one Q_tot per batch entry and time step): reduce over the agent axis with keepdim=True, "
                "e.g. agent_qs_BTA.sum(dim=-1, keepdim=True)")

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int, settings: Any = None) -> Mixer:
        """Build from the env's sizes and, for a mixer registered with settings of its own (``register_mixer(name,
        settings=...)``), those settings (``make_mixer`` passes them; None: their defaults). A mixer with settings
        overrides this; one that sets ``reads_state_layout`` takes ``state_layout=`` too."""
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def regularizer(self, state_BTS: torch.Tensor, rows_T: torch.Tensor) -> torch.Tensor | None:
        """A term of the mixer's own that the learner adds to the loss (a 0-d tensor), or None: none here.

        state [B,T,S] of the batch's steps; ``rows_T`` marks the time rows up to the batch's longest episode.
        """
        return None
