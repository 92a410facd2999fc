"""The recurrent agent network shared by all agents (PyMARL's RNN agent, run over whole sequences)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
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


class StackedAgents:
    """One acting step of K ``RNNAgent``s of one size (K runs), their parameters stacked: batched matmuls for all.

    inputs [K,B,1,A,I], hidden [K,B,A,H] -> (q [K,B,1,A,U], hidden [K,B,A,H]); slice k is ``agents[k](inputs[k],
    hidden[k])``. ``nn.GRU`` has no vmap batching rule, so its cell is written out here as PyTorch computes it:
        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr),  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
        n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h' = n + z (h - n)
    The parameters are copied when it is built: build it again after the agents change.
    """

    PARAMETERS = ("fc1.weight", "fc1.bias", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                  "rnn.bias_hh_l0", "fc2.weight", "fc2.bias")
    """An ``RNNAgent``'s parameters, by name: exactly these, or the agents cannot be stacked."""

    def __init__(self, agents: Sequence[RNNAgent]) -> None:
        problem = self.why_not(agents)
        if problem is not None:
            raise ValueError(f"StackedAgents: {problem}")
        self.k, self.hidden_dim, self.n_actions = len(agents), agents[0].hidden_dim, agents[0].n_actions
        params = [dict(agent.named_parameters()) for agent in agents]
        with torch.no_grad():  # weights [K, out, in], biases [K, out], as each agent holds them
            self._weights = {name: torch.stack([p[name].detach() for p in params]) for name in self.PARAMETERS}

    @staticmethod
    def why_not(agents: Sequence[RNNAgent]) -> str | None:
        """Why ``agents`` cannot be stacked (not plain RNNAgents of one size, dtype and device), or None."""
        if not agents:
            return "no agents given"
        if any(type(agent) is not RNNAgent for agent in agents):
            return f"stacks plain RNNAgents only, got {sorted({type(agent).__name__ for agent in agents})}"
        first = {name: (p.shape, p.dtype, p.device) for name, p in agents[0].named_parameters()}
        if sorted(first) != sorted(StackedAgents.PARAMETERS):
            return f"an RNNAgent with parameters {sorted(first)} is not the one-layer GRU agent it computes"
        for agent in agents[1:]:
            if {name: (p.shape, p.dtype, p.device) for name, p in agent.named_parameters()} != first:
                return "the agents differ in size, dtype or device"
        return None

    def select(self, runs: Sequence[int]) -> StackedAgents:
        """The stack of the agents ``runs`` (indices into this stack), in that order."""
        index = torch.tensor(list(runs), device=self._weights["fc1.bias"].device)
        chosen = copy.copy(self)
        chosen.k = len(runs)
        chosen._weights = {name: w.index_select(0, index) for name, w in self._weights.items()}
        return chosen

    def __call__(self, inputs_KB1AI: torch.Tensor, hidden_KBAH: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # x @ W^T + b as nn.Linear computes it (the weight a transposed view, as F.linear passes it to BLAS), batched
        w = {name: p.transpose(1, 2) if "weight" in name else p.unsqueeze(1) for name, p in self._weights.items()}
        k, b, t, a, i = inputs_KB1AI.shape
        assert t == 1 and k == self.k, f"one step of {self.k} runs' agents, got inputs of shape {inputs_KB1AI.shape}"
        x = torch.relu(torch.baddbmm(w["fc1.bias"], inputs_KB1AI.reshape(k, b * a, i), w["fc1.weight"]))  # [K,BA,H]
        h = hidden_KBAH.reshape(k, b * a, self.hidden_dim)
        gates_in = torch.baddbmm(w["rnn.bias_ih_l0"], x, w["rnn.weight_ih_l0"])  # [K,BA,3H]: r, z, n
        gates_h = torch.baddbmm(w["rnn.bias_hh_l0"], h, w["rnn.weight_hh_l0"])
        r_in, z_in, n_in = gates_in.chunk(3, dim=-1)
        r_h, z_h, n_h = gates_h.chunk(3, dim=-1)
        r, z = torch.sigmoid(r_in + r_h), torch.sigmoid(z_in + z_h)
        n = torch.tanh(n_in + r * n_h)
        h = n + z * (h - n)
        q = torch.baddbmm(w["fc2.bias"], h, w["fc2.weight"])  # [K,BA,U]
        return q.reshape(k, b, 1, a, self.n_actions), h.reshape(k, b, a, self.hidden_dim)
