"""The recurrent agent network shared by all agents (PyMARL's RNN agent, run over whole sequences)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from semzoo.config import AgentConfig
    from semzoo.types import VecCTDEEnv

MASKED_Q = -1e9
"""Q value given to unavailable actions before an argmax (never enters a loss)."""
ModuleT = TypeVar("ModuleT", bound=nn.Module)


def one_hot(index: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """``F.one_hot(index, n).to(dtype)`` without its data-dependent range check, so it runs under ``vmap``: [..., n]."""
    return (index.unsqueeze(-1) == torch.arange(n, device=index.device)).to(dtype)


def flatten_rnns(module: ModuleT) -> ModuleT:
    """``module`` with the weights of each of its recurrent layers in one contiguous chunk (cuDNN's layout).

    ``Module.to`` lays them out so, but a deep copy (a target network, an acting copy) gives every weight its
    own tensor, and cuDNN then compacts them again at every call, with a warning. A no-op off CUDA.
    """
    for layer in module.modules():
        if isinstance(layer, nn.RNNBase):
            layer.flatten_parameters()
    return module


class RNNAgent(nn.Module):
    """obs (+ last action one-hot, + agent id one-hot) -> fc -> ReLU -> GRU -> fc -> Q_a.

    The same GRU weights serve acting (one step, carried hidden state) and training
    (the whole episode in one ``nn.GRU`` call instead of a Python loop per step).
    """

    def __init__(
        self, *, obs_dim: int, n_agents: int, n_actions: int, hidden_dim: int = 64,
        obs_agent_id: bool = True, obs_last_action: bool = True,
    ) -> None:
        super().__init__()
        self.obs_dim, self.n_agents, self.n_actions, self.hidden_dim = obs_dim, n_agents, n_actions, hidden_dim
        self.obs_agent_id, self.obs_last_action = obs_agent_id, obs_last_action
        self.input_dim = obs_dim + (n_actions if obs_last_action else 0) + (n_agents if obs_agent_id else 0)
        self.fc1 = nn.Linear(self.input_dim, hidden_dim)
        self.rnn = nn.GRU(hidden_dim, hidden_dim, batch_first=True)
        self.fc2 = nn.Linear(hidden_dim, n_actions)

    @classmethod
    def for_env(cls, env: VecCTDEEnv, config: AgentConfig) -> RNNAgent:
        """The agent network sized for ``env`` with the sizes and inputs of ``config``."""
        return cls(obs_dim=env.obs_dim, n_agents=env.n_agents, n_actions=env.n_actions, hidden_dim=config.hidden_dim,
                   obs_agent_id=config.obs_agent_id, obs_last_action=config.obs_last_action)

    def build_inputs(self, obs_BTAO: torch.Tensor, last_action_BTA: torch.Tensor) -> torch.Tensor:
        """Concatenate observation, last action (one-hot, zero where the action is -1) and agent id.

        obs [B,T,A,O], last_action [B,T,A] int64 (-1 = none yet) -> inputs [B,T,A,I]
        """
        parts = [obs_BTAO]
        b, t, a, _ = obs_BTAO.shape
        if self.obs_last_action:
            onehot = one_hot(last_action_BTA.clamp(min=0), self.n_actions, obs_BTAO.dtype)
            parts.append(onehot * (last_action_BTA >= 0).unsqueeze(-1).to(obs_BTAO.dtype))
        if self.obs_agent_id:
            eye = torch.eye(a, device=obs_BTAO.device, dtype=obs_BTAO.dtype)
            parts.append(eye.expand(b, t, a, a))
        return torch.cat(parts, dim=-1)

    def forward(self, inputs_BTAI: torch.Tensor, hidden_BAH: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """inputs [B,T,A,I], hidden [B,A,H] or None (zeros) -> (q [B,T,A,U], hidden [B,A,H])."""
        b, t, a, _i = inputs_BTAI.shape
        x = F.relu(self.fc1(inputs_BTAI))  # [B,T,A,H]
        x = x.permute(0, 2, 1, 3).reshape(b * a, t, self.hidden_dim)
        h0 = None if hidden_BAH is None else hidden_BAH.reshape(1, b * a, self.hidden_dim)
        out, h = self.rnn(x, h0)
        q = self.fc2(out).reshape(b, a, t, self.n_actions).permute(0, 2, 1, 3)
        return q, h.reshape(b, a, self.hidden_dim)
