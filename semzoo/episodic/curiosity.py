"""EMC's curiosity: an intrinsic reward from how badly a predictor foresees a VDN learner's Q-values.

Paper: Zheng et al., "Episodic Multi-agent Reinforcement Learning with Curiosity-driven Exploration",
NeurIPS 2021, sec. 4.1; EMU (Na et al., ICLR 2024) reuses it. Shapes: B episodes, T steps (T+1 slots),
A agents, U actions, I agent inputs.

    Q_a(tau, u; psi)         a VDN learner of its own on the extrinsic reward: Q_tot = sum_a Q_a, TD loss,
                             RMSprop, a hard target copy psi^- and a soft copy psi' <- (1 - tau) psi' + tau psi
    P_a(tau, u; phi)         the predictor (the same recurrent agent architecture), Adam
    e_{t,a} = || P_a(tau_{t+1}, .) - c Q_a(tau_{t+1}, .; psi') ||_2          c = curiosity_target_scale (10)
    r^i_t   = scale * mean_a e_{t,a}        scale = max(floor, scale0 * rate ** (env_steps // decay_steps))
    L_P     = sum_{t,a} m_t e_{t,a} / (A sum_t m_t)                          (the predictor's loss)

``Curiosity.reward(clean)`` gives r^i of a sampled batch (0 on padding) and takes that update's steps of
the networks here: r^i comes from the networks as they were before the steps, then the predictor steps
on L_P, the VDN learner on its TD loss, and the soft copy moves; psi^- is synced with psi every
``target_update_episodes x updates_per_episode`` of these updates, the main learner's period.

Checked against EMC's public code (kikojay/EMC, learners/vdn_Qlearner.py, config/algs/EMC_sc2.yaml);
what differs, and why:

- EMC's VDN learner starts from a deep copy of the main agent network; here it is a network of the same
  sizes built from a stream of its own (seeded from ``config.seed``, the run's global RNG untouched), as
  the memory is built apart from the learner. Its predictor is a fresh network in both.
- EMC measures e with ``F.pairwise_distance``, which adds 1e-6 to every difference; here the plain norm.
- EMC hard-syncs psi^- when its episode counter passes ``target_update_interval``; here after the same
  number of updates (one update per episode: the same period), counted here, so the module needs no hook
  from the learner.
- EMC's predictor takes Adam at the learner's ``lr`` (5e-4) and clips its gradient at ``grad_norm_clip``;
  here ``curiosity_lr`` (5e-4 by default) and ``config.learner.grad_clip`` (10).
- EMC decays the scale once each time ``t_env`` has moved ``curiosity_decay_cycle`` past the last decay,
  and can go once below ``curiosity_decay_stop`` before clamping; here the closed form above, exact at
  multiples of ``decay_steps`` and never below the floor.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from semzoo.agents.rnn import MASKED_Q, RNNAgent
from semzoo.episodic.plans import curiosity_bytes

if TYPE_CHECKING:
    from semzoo.config import AgentConfig, LearnerConfig
    from semzoo.episodic.settings import CuriositySettings
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch

CURIOSITY_STREAM = 0xC0210
"""Spawn key of the curiosity's network initialisation under the run seed, apart from every other stream."""
NO_LOSS = float("nan")
"""A loss before the first update (not logged)."""


def default_float_bytes() -> int:
    """Bytes of torch's default float (4; 8 where a run trains in float64): the word of a network's parameters."""
    return torch.finfo(torch.get_default_dtype()).bits // 8


def _agent_network(agent: AgentConfig, *, obs_dim: int, n_agents: int, n_actions: int) -> RNNAgent:
    """The run's agent architecture (``config.agent``'s sizes and inputs) for an env of these sizes."""
    return RNNAgent(obs_dim=obs_dim, n_agents=n_agents, n_actions=n_actions, hidden_dim=agent.hidden_dim,
                    obs_agent_id=agent.obs_agent_id, obs_last_action=agent.obs_last_action)


class Curiosity:
    """EMC's curiosity module of one run (module docstring): ``reward`` trains it and answers r^i of a batch."""

    def __init__(self, *, obs_dim: int, n_agents: int, n_actions: int, agent: AgentConfig, learner: LearnerConfig,
                 curiosity: CuriositySettings, seed: int) -> None:
        for name, value in (("obs_dim", obs_dim), ("n_agents", n_agents), ("n_actions", n_actions)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r}: expected a positive int (the env's size)")
        self.obs_dim, self.n_agents, self.n_actions = obs_dim, n_agents, n_actions
        self.learner_config, self.config = learner, curiosity
        self.gamma = learner.gamma
        self.sync_interval = max(1, round(learner.target_update_episodes * learner.updates_per_episode))
        """Updates between two hard syncs of psi^- (the main learner's period, in updates)."""
        stream = int(np.random.SeedSequence([seed, CURIOSITY_STREAM]).generate_state(1, np.uint64)[0] >> np.uint64(1))
        with torch.random.fork_rng(devices=[]):  # the run's global CPU stream is left where it was
            torch.default_generator.manual_seed(stream)
            self.q_net = _agent_network(agent, obs_dim=obs_dim, n_agents=n_agents, n_actions=n_actions)
            self.predictor = _agent_network(agent, obs_dim=obs_dim, n_agents=n_agents, n_actions=n_actions)
        self.target_q_net = copy.deepcopy(self.q_net).requires_grad_(False)
        self.soft_q_net = copy.deepcopy(self.q_net).requires_grad_(False)
        self.q_optimizer = torch.optim.RMSprop(self.q_net.parameters(), lr=learner.lr, alpha=learner.rms_alpha,
                                               eps=learner.rms_eps)
        self.predictor_optimizer = torch.optim.Adam(self.predictor.parameters(), lr=curiosity.curiosity_lr)
        self.device = torch.device("cpu")
        self._scale = curiosity.curiosity_scale
        self.updates = 0
        self._losses = {"curiosity_loss_td": NO_LOSS, "curiosity_loss_predictor": NO_LOSS}

    @classmethod
    def from_config(cls, setup: MemorySetup) -> Curiosity | None:
        """The curiosity of a memory of ``setup`` (its ``curiosity`` section, the run's ``agent`` and ``learner``
        sections, which it copies as a second learner); None when off."""
        settings = setup.settings("curiosity")
        if not settings.curiosity:
            return None
        return cls(obs_dim=setup.obs_dim, n_agents=setup.n_agents, n_actions=setup.n_actions, agent=setup.agent,
                   learner=setup.learner, curiosity=settings, seed=setup.seed)

    # ----- the schedule --------------------------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """The intrinsic reward's current scale."""
        return self._scale

    def on_env_steps(self, env_steps: int) -> None:
        """The run stands at ``env_steps``: scale = max(floor, scale0 * rate ** (env_steps // decay_steps))."""
        c = self.config
        self._scale = max(c.curiosity_floor,
                          c.curiosity_scale * c.curiosity_decay_rate ** (int(env_steps) // c.curiosity_decay_steps))

    # ----- one update ----------------------------------------------------------------------------------------

    def networks(self) -> dict[str, nn.Module]:
        """Every network, by name (the names of ``state_dict``)."""
        return {"q_net": self.q_net, "target_q_net": self.target_q_net, "soft_q_net": self.soft_q_net,
                "predictor": self.predictor}

    def _place(self, device: torch.device) -> None:
        """Networks and optimiser states onto ``device`` (the device of the batches given)."""
        if device == self.device:
            return
        for net in self.networks().values():
            net.to(device)
        for optimizer in (self.q_optimizer, self.predictor_optimizer):
            optimizer.load_state_dict(optimizer.state_dict())  # casts its state to the parameters' device
        self.device = device

    def reward(self, clean: CleanBatch) -> torch.Tensor:
        """r^i [B,T] of ``clean`` (0 on padding), from the networks before this update's steps; then the steps.

        Runs with gradient enabled whatever the caller holds (the learner's phase 1 holds ``no_grad``); r^i
        itself carries no gradient.
        """
        obs = clean.obs
        if obs.ndim != 4 or obs.shape[2:] != (self.n_agents, self.obs_dim):
            raise ValueError(f"clean.obs has shape {tuple(obs.shape)}, expected [B, T+1, {self.n_agents}, "
                             f"{self.obs_dim}]; give the batch of the env this curiosity was built for")
        self._place(obs.device)
        mask_BT = clean.mask
        n_real = mask_BT.sum().clamp(min=1.0)
        with torch.enable_grad():
            inputs = self.q_net.build_inputs(obs, clean.last_actions)  # [B,T+1,A,I]
            with torch.no_grad():
                goal_BTAU = self.config.curiosity_target_scale * self.soft_q_net(inputs)[0][:, 1:]
            error_BTA = torch.linalg.vector_norm(self.predictor(inputs)[0][:, 1:] - goal_BTAU, dim=-1)
            intrinsic_BT = self._scale * error_BTA.detach().mean(dim=-1) * mask_BT
            predictor_loss = (error_BTA * mask_BT.unsqueeze(-1)).sum() / (n_real * self.n_agents)
            self._step(self.predictor_optimizer, predictor_loss, self.predictor)
            td_loss = self._vdn_td_loss(clean, inputs, n_real)
            self._step(self.q_optimizer, td_loss, self.q_net)
        with torch.no_grad():
            tau = self.config.curiosity_tau
            for soft, online in zip(self.soft_q_net.parameters(), self.q_net.parameters(), strict=True):
                soft.mul_(1.0 - tau).add_(online, alpha=tau)
        self.updates += 1
        if self.updates % self.sync_interval == 0:
            self.target_q_net.load_state_dict(self.q_net.state_dict())
        self._losses = {"curiosity_loss_td": float(td_loss.detach()),
                        "curiosity_loss_predictor": float(predictor_loss.detach())}
        return intrinsic_BT.to(clean.reward.dtype)

    def _vdn_td_loss(self, clean: CleanBatch, inputs: torch.Tensor, n_real: torch.Tensor) -> torch.Tensor:
        """sum_t m_t (sum_a Q_a(tau_t, u_t) - y_t)^2 / sum_t m_t, y_t = r_t + gamma (1 - term_t) V(t+1) (extrinsic r)."""
        q_BTAU = self.q_net(inputs)[0]
        q_tot_BT = q_BTAU[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1).sum(-1)
        with torch.no_grad():
            target_q = self.target_q_net(inputs)[0][:, 1:]
            avail = clean.avail[:, 1:]
            chooser = q_BTAU[:, 1:] if self.learner_config.double_q else target_q  # double Q: the online argmax
            best_BTA = chooser.masked_fill(~avail, MASKED_Q).argmax(dim=-1)
            next_value_BT = target_q.gather(-1, best_BTA.unsqueeze(-1)).squeeze(-1).sum(-1)
            y_BT = clean.bootstrapped(next_value_BT, self.gamma)
        return ((q_tot_BT - y_BT) ** 2 * clean.mask).sum() / n_real

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, net: nn.Module) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(net.parameters()), self.learner_config.grad_clip)
        optimizer.step()

    # ----- state ---------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers, the scale and the counters: what an exact resume needs."""
        return {**{name: net.state_dict() for name, net in self.networks().items()},
                "q_optimizer": self.q_optimizer.state_dict(),
                "predictor_optimizer": self.predictor_optimizer.state_dict(),
                "scale": self._scale, "updates": self.updates,
                "losses": {name: value for name, value in self._losses.items() if not np.isnan(value)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from ``state_dict()`` (scalars may come back as 0-d arrays)."""
        for name, net in self.networks().items():
            net.load_state_dict(state[name])
        self.q_optimizer.load_state_dict(state["q_optimizer"])
        self.predictor_optimizer.load_state_dict(state["predictor_optimizer"])
        self._scale = float(np.asarray(state["scale"]).item())
        self.updates = int(np.asarray(state["updates"]).item())
        self._losses = {name: NO_LOSS for name in self._losses}
        self._losses.update({name: float(np.asarray(value).item()) for name, value in state["losses"].items()})

    @property
    def nbytes(self) -> int:
        """Bytes of the networks and the optimisers' states."""
        tensors = [t for net in self.networks().values() for t in net.state_dict().values()]
        for optimizer in (self.q_optimizer, self.predictor_optimizer):
            tensors += [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
        return sum(t.numel() * t.element_size() for t in tensors)

    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """Bytes the curiosity of such a run holds once trained (``nbytes`` after the first update); 0 when off."""
        return curiosity_bytes(setup, word_bytes=default_float_bytes())

    def metrics(self) -> dict[str, float]:
        """The current scale and the last update's losses of the VDN learner and the predictor."""
        losses = {name: value for name, value in self._losses.items() if not np.isnan(value)}
        return {"curiosity_scale": self._scale, **losses}


__all__ = ["Curiosity"]
