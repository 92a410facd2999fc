"""A trained run's agents as a policy that acts in a user's own PettingZoo loop (parallel or AEC).

``load_policy(run_dir)`` builds the agent network from the run's config and last valid checkpoint
(no replay, no episodic table, no optimiser). The policy keeps each agent's GRU hidden state and
last action between calls and pads absent agents exactly as training's CTDE adapter does, so its
actions equal those of ``semzoo evaluate`` for the same env seeds. See docs/policy.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from semzoo.agents.rnn import RNNAgent
from semzoo.agents.selection import epsilon_greedy
from semzoo.types import NO_ACTION
from semzoo.wrappers.ctde import ACTION_MASK_KEY, AgentLayout


class Policy:
    """Acts for the agents of one env: ``act(observations)`` (parallel) or ``act_one(agent, obs)`` (AEC).

    Agents are the env's ``possible_agents`` in training's order; every call runs all of them in one
    forward pass, absent (dead) agents padded with a zero observation and the no-op, as in training.
    Greedy by default; with ``epsilon`` > 0 each agent explores uniformly over its available actions,
    drawn from a generator seeded with ``seed``. Call ``reset()`` at the start of every episode.
    ``make_env()`` builds the env the agents were trained on (a ``load_policy`` policy knows its run's env id and
    arguments: on ``smax:<map>``, the rules profile among them).
    """

    def __init__(self, agent: RNNAgent, layout: AgentLayout, *, device: str | torch.device = "cpu",
                 epsilon: float = 0.0, seed: int = 0, env_id: str | None = None,
                 env_args: dict[str, Any] | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon={epsilon}: expected a probability in [0, 1]")
        if (agent.n_agents, agent.obs_dim, agent.n_actions) != (layout.n_agents, layout.obs_dim, layout.n_actions):
            raise ValueError(f"agent network sized (agents, obs, actions) = {(agent.n_agents, agent.obs_dim, agent.n_actions)} "
                             f"but the env has {(layout.n_agents, layout.obs_dim, layout.n_actions)}: use the run's own env")
        self.device = torch.device(device)
        self.agent = agent.to(self.device).eval().requires_grad_(False)
        self.layout = layout
        self.epsilon = float(epsilon)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self._scratch_generator = torch.Generator(device=self.device)
        self.env_id, self.env_args = env_id, dict(env_args or {})
        self.reset()

    def make_env(self) -> Any:
        """The PettingZoo ParallelEnv the agents were trained on: ``make_env(env_id, **env_args)`` of their run."""
        if self.env_id is None:
            raise ValueError("this policy was built without its env id: build its env with semzoo.make_env(id, ...)")
        from semzoo.envs.registry import make_env

        return make_env(self.env_id, **self.env_args)

    @property
    def agent_names(self) -> tuple[str, ...]:
        """The env's ``possible_agents``, in the order of the network's agent axis."""
        return self.layout.agent_names

    def reset(self) -> None:
        """Start a new episode: zero hidden states, no last action."""
        self._hidden_1AH: torch.Tensor | None = None
        self._last_action_11A = torch.full((1, 1, self.layout.n_agents), NO_ACTION, dtype=torch.int64, device=self.device)
        self._cycle_acted: set[str] = set()
        self._cycle_rng_state: torch.Tensor | None = None
        self.last_q: torch.Tensor | None = None
        """Q values [A,U] of each agent's last step (unmasked; rows in ``agent_names`` order)."""

    # ----- parallel API -------------------------------------------------------------------------------------------

    @torch.no_grad()
    def act(self, observations: dict[str, Any], *, action_masks: dict[str, Any] | None = None,
            infos: dict[str, dict] | None = None) -> dict[str, int]:
        """Actions for the agents present in ``observations`` (a ParallelEnv's obs dict), one step of the episode.

        An observation is an array or a dict with ``observation`` and ``action_mask``; for array
        observations a mask may come in ``action_masks[agent]`` or ``infos[agent]["action_mask"]``.
        """
        obs_AO, avail_AU, alive_A = self._pad(observations, action_masks or _masks_in(infos))
        q_AU, hidden_1AH = self._forward(obs_AO)
        chosen_A = epsilon_greedy(q_AU[None], avail_AU[None], self.epsilon, self.generator)[0]
        self._hidden_1AH, self._last_action_11A, self.last_q = hidden_1AH, chosen_A.view(1, 1, -1), q_AU
        actions = chosen_A.tolist()
        return {agent: actions[i] for i, agent in enumerate(self.agent_names) if alive_A[i]}

    # ----- AEC API ------------------------------------------------------------------------------------------------

    @torch.no_grad()
    def act_one(self, agent: str, observation: Any, *, action_mask: Any = None, info: dict | None = None) -> int:
        """The action of ``agent`` in an ``env.agent_iter()`` loop; the same actions as ``act`` on the parallel env.

        A step (cycle) ends when an agent that already acted in it is asked again: agents that did not
        act in a cycle have left and advance as padded (dead) agents, as in ``act``. Exploration draws the
        random numbers of a whole step at once, so a seed gives the same actions through both APIs.
        """
        if agent not in self.agent_names:
            raise ValueError(f"unknown agent {agent!r}: the run's agents are {list(self.agent_names)}")
        if agent in self._cycle_acted:
            self._end_cycle()
        if not self._cycle_acted:
            self._cycle_rng_state = self.generator.get_state()
        if action_mask is None and info:
            action_mask = info.get(ACTION_MASK_KEY)
        obs_AO, avail_AU, _ = self._pad({agent: observation}, {agent: action_mask} if action_mask is not None else None)
        q_AU, hidden_1AH = self._forward(obs_AO)
        chosen_A = self._select_in_cycle(q_AU, avail_AU)
        i = self.agent_names.index(agent)
        self._commit([i], hidden_1AH, chosen_A, q_AU)
        self._cycle_acted.add(agent)
        return int(chosen_A[i])

    def _end_cycle(self) -> None:
        """Advance the agents that did not act in the cycle that ends as padded dead agents."""
        absent = [i for i, name in enumerate(self.agent_names) if name not in self._cycle_acted]
        if absent:
            obs_AO, avail_AU, _ = self._pad({}, None)
            q_AU, hidden_1AH = self._forward(obs_AO)
            self._commit(absent, hidden_1AH, self._select_in_cycle(q_AU, avail_AU), q_AU)
        self._cycle_acted.clear()

    def _select_in_cycle(self, q_AU: torch.Tensor, avail_AU: torch.Tensor) -> torch.Tensor:
        """``epsilon_greedy`` over all agents with the random numbers of this cycle's step (drawn once per step)."""
        if self.epsilon <= 0.0:
            return epsilon_greedy(q_AU[None], avail_AU[None], 0.0, self.generator)[0]
        assert self._cycle_rng_state is not None
        self._scratch_generator.set_state(self._cycle_rng_state)
        chosen_A = epsilon_greedy(q_AU[None], avail_AU[None], self.epsilon, self._scratch_generator)[0]
        self.generator.set_state(self._scratch_generator.get_state())
        return chosen_A

    def _commit(self, rows: list[int], hidden_1AH: torch.Tensor, chosen_A: torch.Tensor, q_AU: torch.Tensor) -> None:
        """Keep the new hidden state, action and Q values of agents ``rows`` only."""
        take_A = torch.zeros(self.layout.n_agents, dtype=torch.bool, device=self.device)
        take_A[rows] = True
        # A missing initial state is zeros to the GRU, so the agents not taken keep exactly that.
        hidden_before = torch.zeros_like(hidden_1AH) if self._hidden_1AH is None else self._hidden_1AH
        q_before = torch.zeros_like(q_AU) if self.last_q is None else self.last_q
        self._hidden_1AH = torch.where(take_A[None, :, None], hidden_1AH, hidden_before)
        self._last_action_11A = torch.where(take_A, chosen_A, self._last_action_11A.view(-1)).view(1, 1, -1)
        self.last_q = torch.where(take_A[:, None], q_AU, q_before)

    # ----- shared -------------------------------------------------------------------------------------------------

    def _pad(self, observations: dict[str, Any], masks: dict[str, Any] | None) -> tuple[torch.Tensor, torch.Tensor, list[bool]]:
        unknown = sorted(set(observations) - set(self.agent_names))
        if unknown:
            raise ValueError(f"observations of unknown agents {unknown}: the run's agents are {list(self.agent_names)}")
        try:
            obs_AO, avail_AU, alive_A = self.layout.pad(observations, masks)
        except ValueError as error:
            if self.env_id is None:
                raise
            args = "".join(f", {key}={value!r}" for key, value in sorted(self.env_args.items()))
            raise ValueError(f"{error}; the agents were trained on make_env({self.env_id!r}{args}), which "
                             "policy.make_env() builds") from None
        return (torch.as_tensor(obs_AO, device=self.device), torch.as_tensor(avail_AU, device=self.device),
                alive_A.tolist())

    def _forward(self, obs_AO: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of all agents: obs [A,O] -> (q [A,U], hidden [1,A,H]) from the carried hidden state and last action."""
        inputs = self.agent.build_inputs(obs_AO[None, None], self._last_action_11A)
        q_11AU, hidden_1AH = self.agent(inputs, self._hidden_1AH)
        return q_11AU[0, 0], hidden_1AH

    # ----- export -------------------------------------------------------------------------------------------------

    def export(self, path: str | Path) -> Path:
        """Write the agent network as TorchScript that runs with torch alone (no semzoo); see docs/policy.md.

        ``torch.jit.load(path)(obs, last_action, hidden) -> (q, hidden)`` for one step of B envs:

        - obs: float32 [B,A,O], agent i's flat observation zero-padded to O; a dead agent all zeros;
        - last_action: int64 [B,A], the action each agent took at the previous step, -1 at the first
          step; a dead agent's action is the no-op (0);
        - hidden: float32 [B,A,H], zeros at the first step, then the hidden returned by the last call;
        - q: float32 [B,A,U]; mask unavailable actions (padded ones, a dead agent's all but the no-op)
          before the argmax.

        Agents are ``agent_names`` (the env's ``possible_agents``) in order; A, O, U, H are the
        module's attributes ``n_agents``, ``obs_dim``, ``n_actions``, ``hidden_dim``.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        module = torch.jit.script(AgentStep(self.agent).cpu().eval())
        module.save(str(path))
        return path


class AgentStep(nn.Module):
    """One step of an ``RNNAgent`` with explicit inputs, for TorchScript export.

    (obs [B,A,O], last_action [B,A] int64 (-1 = none), hidden [B,A,H]) -> (q [B,A,U], hidden [B,A,H])
    """

    def __init__(self, agent: RNNAgent) -> None:
        super().__init__()
        self.fc1, self.rnn, self.fc2 = agent.fc1, agent.rnn, agent.fc2
        self.n_agents, self.obs_dim, self.n_actions = agent.n_agents, agent.obs_dim, agent.n_actions
        self.hidden_dim = agent.hidden_dim
        self.obs_agent_id, self.obs_last_action = agent.obs_agent_id, agent.obs_last_action

    def forward(self, obs: torch.Tensor, last_action: torch.Tensor,
                hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, a = obs.shape[0], obs.shape[1]
        parts = [obs]
        if self.obs_last_action:
            onehot = F.one_hot(last_action.clamp(min=0), self.n_actions).to(obs.dtype)
            parts.append(onehot * (last_action >= 0).unsqueeze(-1).to(obs.dtype))
        if self.obs_agent_id:
            parts.append(torch.eye(a, dtype=obs.dtype, device=obs.device).expand(b, a, a))
        x = F.relu(self.fc1(torch.cat(parts, dim=-1))).reshape(b * a, 1, self.hidden_dim)
        out, h = self.rnn(x, hidden.reshape(1, b * a, self.hidden_dim))
        return self.fc2(out).reshape(b, a, self.n_actions), h.reshape(b, a, self.hidden_dim)


def _masks_in(infos: dict[str, dict] | None) -> dict[str, Any] | None:
    if not infos:
        return None
    masks = {agent: info[ACTION_MASK_KEY] for agent, info in infos.items() if isinstance(info, dict) and ACTION_MASK_KEY in info}
    return masks or None


def load_policy(run_dir: str | Path, *, device: str = "cpu", epsilon: float = 0.0, seed: int | None = None) -> Policy:
    """The agents of the last valid checkpoint in ``run_dir`` as a ``Policy`` (greedy unless ``epsilon`` > 0).

    Builds the run's env once to read its agents and spaces (``possible_agents`` order, padding);
    ``seed`` seeds exploration (default: the run's seed).
    """
    from semzoo.envs.registry import make_env
    from semzoo.run.rundir import load_trained

    config, payload = load_trained(run_dir, purpose="to load a policy from")
    env = make_env(config.env, **config.env_args)
    try:
        layout = AgentLayout.of_env(env)
    finally:
        env.close()
    agent = RNNAgent.for_env(layout, config.agent)
    agent.load_state_dict(payload["learner"]["agent"])
    return Policy(agent, layout, device=device, epsilon=epsilon, seed=config.seed if seed is None else seed,
                  env_id=config.env, env_args=config.env_args)
