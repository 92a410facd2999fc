"""Cooperative matrix games as PettingZoo ParallelEnvs: every agent receives the same payoff.

One-step games (``climbing``, ``penalty``, ``qtran``, ``additive``, ``custom``) last one step;
``two_step`` is the two-step game of the QMIX paper (Rashid et al. 2018, Fig. 3); ``m_step`` is the
m-step game of the MAVEN paper (Mahajan et al. 2019, sec. 5), a sparse exploration test of up to m steps.
Payoff tables are indexed ``payoff[a_0, a_1, ...]``: rows are agent 0's actions, columns agent 1's.

Observation and global state are the same one-hot vector of the game's current state, with a last
slot for "episode over": ``[start, end]`` for one-step games, ``[1, 2A, 2B, end]`` for ``two_step``.
``m_step`` has two one-hots side by side, as in MAVEN's code: the step ``[0, 1, ..., m - 1, end]`` and the
branch ``[(0,0), (0,1), (1,0), (1,1)]`` the first joint action chose (all zero before it).
The games are deterministic: ``reset(seed=...)`` is accepted for API compatibility and changes nothing.
Each agent's observation is ``{"observation", "action_mask"}``, or with ``obs_format="box"`` the flat
observation alone with the mask in ``infos[agent]["action_mask"]`` (SuperSuit's Box-only wrappers take that).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from semzoo.wrappers.smac import check_obs_format

CLIMBING_PAYOFF = ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0))
QTRAN_PAYOFF = ((8.0, -12.0, -12.0), (-12.0, 0.0, 0.0), (-12.0, 0.0, 0.0))
DEFAULT_PENALTY_K = -100.0
# additive: payoff[a_0, a_1] = u_0[a_0] + u_1[a_1]; the argmaxes (1, 0) sit off the diagonal.
ADDITIVE_UTILITIES = ((0.0, 6.0, 2.0), (4.0, 0.0, 1.0))
# two_step: agent 0's first action picks the second-step state; the first step pays nothing.
TWO_STEP_FIRST_REWARD = 0.0
TWO_STEP_PAYOFF_2A = ((7.0, 7.0), (7.0, 7.0))
TWO_STEP_PAYOFF_2B = ((0.0, 1.0), (1.0, 8.0))

ONE_STEP_STATES = ("start", "end")
TWO_STEP_STATES = ("1", "2A", "2B", "end")
TWO_STEP_BRANCHES = ("2A", "2B")  # agent 0's first action indexes this; payoff[b] is the table of branch b
# m_step (MAVEN, Mahajan et al. 2019, sec. 5; the rewards of its code, nstep_matrix_game.py with good_branches=2):
# the first joint action of 2 agents x 2 actions picks a branch; on the branches (0,0) and (1,1) each step that
# repeats the branch's joint action pays 1 and the episode goes on, any other joint action pays 0 and ends it; the
# branches (0,1) and (1,0) end at once with 0. The last step of branch (0,0) pays M_STEP_FINAL_PAYOFF instead, for
# any joint action. Best return m + 3: (0,0) for m - 1 steps, then (1,1); every other full episode returns m.
M_STEP_CHAIN_REWARD = 1.0
M_STEP_PAYING_BRANCHES = ((0, 0), (1, 1))
M_STEP_FINAL_PAYOFF = ((1.0, 1.0), (1.0, 4.0))
M_STEP_JOINT_ACTIONS = ((0, 0), (0, 1), (1, 0), (1, 1))  # the branch one-hot's order
DEFAULT_M = 10
"""MAVEN plots the m-step game at m = 10."""

GAME_DESCRIPTIONS: dict[str, str] = {
    "climbing": "3x3 climbing game: optimum 11 guarded by -30 miscoordination penalties",
    "penalty": "3x3 penalty game: two optima of 10, miscoordinating on them costs k (default -100)",
    "qtran": "3x3 QTRAN game: optimum 8, every other joint action at most 0",
    "additive": "3x3 game whose payoff is a sum of per-agent terms; unique off-diagonal optimum 10",
    "two_step": "QMIX paper two-step game: agent 0 picks state 2A (always 7) or 2B (optimum 8)",
    "m_step": "MAVEN paper m-step game (env arg m, default 10): repeat (0,0) or (1,1) or the episode ends; "
              "m + 3 for (0,0) m - 1 times then (1,1), m otherwise",
    "custom": "any payoff array given as payoff=, one axis per agent (n >= 2 agents)",
}
GAMES: tuple[str, ...] = tuple(GAME_DESCRIPTIONS)


def parallel_env(
    game: str = "climbing",
    *,
    payoff: Any = None,
    k: float = DEFAULT_PENALTY_K,
    m: int = DEFAULT_M,
    render_mode: str | None = None,
    obs_format: str = "dict",
) -> MatrixGameEnv:
    """Build a cooperative matrix game as a PettingZoo ParallelEnv (see ``GAMES``; ``obs_format`` "dict" or "box")."""
    return MatrixGameEnv(game, payoff=payoff, k=k, m=m, render_mode=render_mode, obs_format=obs_format)


def env(
    game: str = "climbing",
    *,
    payoff: Any = None,
    k: float = DEFAULT_PENALTY_K,
    m: int = DEFAULT_M,
    render_mode: str | None = None,
    obs_format: str = "dict",
) -> Any:
    """The same game as an AEC env (PettingZoo's ``parallel_to_aec`` conversion)."""
    return parallel_to_aec(parallel_env(game, payoff=payoff, k=k, m=m, render_mode=render_mode, obs_format=obs_format))


def _validated_payoff(payoff: Any) -> np.ndarray:
    """A user's payoff as a read-only float64 array with one axis (>= 1 action) per agent (>= 2)."""
    try:
        table = np.asarray(payoff)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"payoff could not be read as an array ({error}); expected a rectangular nested list "
            "or ndarray of numbers; fix the ragged rows"
        ) from None
    if table.dtype.kind not in "iuf":
        raise ValueError(
            f"payoff has dtype {table.dtype}; expected real numbers (int or float); "
            "pass a numeric nested list or ndarray"
        )
    if table.ndim < 2 or 0 in table.shape:
        raise ValueError(
            f"payoff has shape {table.shape}; expected one axis of >= 1 action per agent and "
            ">= 2 agents, e.g. shape (3, 3); pass a table with ndim >= 2 and no empty axis"
        )
    table = np.array(table, dtype=np.float64)
    if not np.isfinite(table).all():
        raise ValueError(
            "payoff contains NaN or infinite entries; expected finite numbers; "
            "replace them with large finite penalties"
        )
    table.flags.writeable = False
    return table


class MatrixGameEnv(ParallelEnv):
    """A cooperative matrix game (or the two-step game): n agents act at once, all get the payoff.

    Per agent i: observation {"observation": float32 [S], "action_mask": int8 [n_actions[i]]} (``obs_format="box"``:
    float32 [S], the mask in ``infos[agent]["action_mask"]``), action Discrete(n_actions[i]); global state float32 [S]; S = number of game states + 1 (end)
    (``m_step``: m + 1 step slots + 4 branch slots).
    Attributes: ``payoff`` float64 [n_actions...] (``two_step``: [2, 2, 2], ``payoff[0]`` is the
    table of state 2A, ``payoff[1]`` of 2B; ``m_step``: [2, 2], the last step's table on branch (0,0)),
    ``episode_limit``, ``optimal_return``, ``n_actions``.
    """

    metadata: dict[str, Any] = {"render_modes": ["human"], "name": "matrix_game_v0", "is_parallelizable": True}

    def __init__(
        self,
        game: str = "climbing",
        *,
        payoff: Any = None,
        k: float = DEFAULT_PENALTY_K,
        m: int = DEFAULT_M,
        render_mode: str | None = None,
        obs_format: str = "dict",
    ) -> None:
        check_obs_format(obs_format)
        if not isinstance(game, str) or game not in GAMES:
            raise ValueError(f"unknown game {game!r}; expected one of {GAMES}; pick one of those names")
        if payoff is not None and game != "custom":
            raise ValueError(
                f"payoff= was given with game {game!r}; a payoff table is only read by game 'custom'; "
                "pass game='custom' or drop payoff="
            )
        is_real = isinstance(k, (int, float, np.integer, np.floating)) and not isinstance(k, bool)
        if not is_real or not np.isfinite(k):
            raise ValueError(
                f"k={k!r} is not a finite number; expected a float such as -100.0; pass a finite k"
            )
        if game != "penalty" and k != DEFAULT_PENALTY_K:
            raise ValueError(
                f"k={k!r} was given with game {game!r}; k only applies to game 'penalty'; drop k="
            )
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 2:
            raise ValueError(
                f"m={m!r} is not an int >= 2; expected the m-step game's length, e.g. m=10 (MAVEN's); pass an int >= 2"
            )
        if game != "m_step" and m != DEFAULT_M:
            raise ValueError(f"m={m!r} was given with game {game!r}; m only applies to game 'm_step'; drop m=")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; expected None or 'human'; pass one of those"
            )

        self.game = game
        self.obs_format = obs_format
        self.render_mode = render_mode
        self.payoff = self._payoff_for(game, payoff, float(k))
        self.episode_limit = {"two_step": 2, "m_step": int(m)}.get(game, 1)
        branch_slots = 0
        if game == "two_step":
            self.n_actions: tuple[int, ...] = self.payoff.shape[1:]
            self.optimal_return = TWO_STEP_FIRST_REWARD + float(self.payoff.max())
            self.state_names: tuple[str, ...] = TWO_STEP_STATES
        elif game == "m_step":
            self.n_actions = self.payoff.shape
            self.optimal_return = M_STEP_CHAIN_REWARD * (self.episode_limit - 1) + float(self.payoff.max())
            self.state_names = (*(str(t) for t in range(self.episode_limit)), "end")
            branch_slots = len(M_STEP_JOINT_ACTIONS)
        else:
            self.n_actions = self.payoff.shape
            self.optimal_return = float(self.payoff.max())
            self.state_names = ONE_STEP_STATES

        self.possible_agents = [f"agent_{i}" for i in range(len(self.n_actions))]
        self.agents: list[str] = []
        state_dim = len(self.state_names) + branch_slots
        # Cached once so that every call returns the same space object (PettingZoo API requirement).
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, shape=(state_dim,), dtype=np.float32)
        obs_box = gymnasium.spaces.Box(0.0, 1.0, shape=(state_dim,), dtype=np.float32)
        self.observation_spaces: dict[str, gymnasium.spaces.Space] = {
            agent: obs_box if obs_format == "box" else gymnasium.spaces.Dict(
                {"observation": obs_box, "action_mask": gymnasium.spaces.Box(0, 1, shape=(n,), dtype=np.int8)}
            )
            for agent, n in zip(self.possible_agents, self.n_actions)
        }
        self.action_spaces: dict[str, gymnasium.spaces.Discrete] = {
            agent: gymnasium.spaces.Discrete(n) for agent, n in zip(self.possible_agents, self.n_actions)
        }
        self._state_index: int | None = None
        self._branch: int | None = None  # m_step: index into M_STEP_JOINT_ACTIONS once the first joint action is taken
        self._last_actions: tuple[int, ...] | None = None
        self._last_reward: float | None = None

    @staticmethod
    def _payoff_for(game: str, payoff: Any, k: float) -> np.ndarray:
        """The payoff array of a named game (read-only float64)."""
        if game == "custom":
            if payoff is None:
                raise ValueError(
                    "game 'custom' needs payoff=; expected a numeric array with one axis per agent; "
                    "pass e.g. payoff=[[1, 0], [0, 1]]"
                )
            return _validated_payoff(payoff)
        if game == "climbing":
            table = np.array(CLIMBING_PAYOFF)
        elif game == "penalty":
            table = np.array([[10.0, 0.0, k], [0.0, 2.0, 0.0], [k, 0.0, 10.0]])
        elif game == "qtran":
            table = np.array(QTRAN_PAYOFF)
        elif game == "m_step":
            table = np.array(M_STEP_FINAL_PAYOFF)
        elif game == "additive":
            utility_0, utility_1 = (np.array(u) for u in ADDITIVE_UTILITIES)
            table = utility_0[:, None] + utility_1[None, :]
        else:  # two_step
            table = np.array([TWO_STEP_PAYOFF_2A, TWO_STEP_PAYOFF_2B])
        table.flags.writeable = False
        return table

    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        return self.action_spaces[agent]

    def state(self) -> np.ndarray:
        """Global state: one-hot float32 [S] over ``state_names`` (``m_step``: then the branch's one-hot)."""
        if self._state_index is None:
            raise RuntimeError("state() was called before reset(); call reset() first")
        state_S = np.zeros(self.state_space.shape, dtype=np.float32)
        state_S[self._state_index] = 1.0
        if self._branch is not None:
            state_S[len(self.state_names) + self._branch] = 1.0
        return state_S

    def _observations(self, agents: list[str]) -> dict[str, Any]:
        if self.obs_format == "box":
            return {agent: self.state() for agent in agents}
        return {agent: {"observation": self.state(), "action_mask": self._mask(agent)} for agent in agents}

    def _mask(self, agent: str) -> np.ndarray:
        """Every action is always available: int8 ones [n_actions of ``agent``]."""
        return np.ones(int(self.action_spaces[agent].n), dtype=np.int8)

    def _infos(self, agents: list[str]) -> dict[str, dict[str, Any]]:
        """Empty infos, or (``box``) the action mask the observation no longer carries."""
        return {agent: {"action_mask": self._mask(agent)} if self.obs_format == "box" else {} for agent in agents}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        self.agents = list(self.possible_agents)
        self._state_index = 0
        self._branch = None
        self._last_actions = None
        self._last_reward = None
        if self.render_mode == "human":
            self.render()
        return self._observations(self.agents), self._infos(self.agents)

    def step(self, actions: dict[str, Any]) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        if not self.agents:
            if not actions:  # no agent, no action: a no-op, as in PettingZoo's MPE (SuperSuit's black_death_v3 needs it)
                return {}, {}, {}, {}, {}
            raise RuntimeError("step() was called with no live agents; call reset() to start an episode")
        if set(actions) != set(self.agents):
            raise ValueError(
                f"actions has keys {sorted(actions)}; expected exactly one action for each of {self.agents}; "
                "give every live agent an action"
            )
        for agent in self.agents:
            if not self.action_spaces[agent].contains(actions[agent]):
                raise ValueError(
                    f"action {actions[agent]!r} of {agent} is not in {self.action_spaces[agent]}; "
                    f"expected an int in [0, {self.action_spaces[agent].n}); pass a legal action"
                )
        joint = tuple(int(actions[agent]) for agent in self.possible_agents)
        assert self._state_index is not None  # set by reset(); self.agents is empty before it

        if self.game == "m_step":
            reward, done = self._m_step_transition(joint)
        elif self.game == "two_step" and self.state_names[self._state_index] == "1":
            reward = TWO_STEP_FIRST_REWARD
            self._state_index = self.state_names.index(TWO_STEP_BRANCHES[joint[0]])
            done = False
        else:
            if self.game == "two_step":
                branch = TWO_STEP_BRANCHES.index(self.state_names[self._state_index])
                reward = float(self.payoff[branch][joint])
            else:
                reward = float(self.payoff[joint])
            self._state_index = self.state_names.index("end")
            done = True

        acting = self.agents
        observations = self._observations(acting)
        rewards = {agent: reward for agent in acting}
        terminations = {agent: done for agent in acting}
        truncations = {agent: False for agent in acting}
        infos = self._infos(acting)
        if done:
            self.agents = []
        self._last_actions, self._last_reward = joint, reward
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _m_step_transition(self, joint: tuple[int, ...]) -> tuple[float, bool]:
        """(reward, episode over) of ``joint`` in the m-step game; moves the state on."""
        assert self._state_index is not None
        step = self._state_index  # state_names[t] is step t for t < m
        if step == 0:
            self._branch = M_STEP_JOINT_ACTIONS.index(joint)
        assert self._branch is not None
        branch = M_STEP_JOINT_ACTIONS[self._branch]
        last_step = step == self.episode_limit - 1
        if last_step and branch == M_STEP_PAYING_BRANCHES[0]:
            reward = float(self.payoff[joint])  # the bonus of the (0,0) branch: any joint action pays, (1,1) most
        elif branch in M_STEP_PAYING_BRANCHES and joint == branch:
            reward = M_STEP_CHAIN_REWARD
        else:
            reward = 0.0
        done = last_step or reward == 0.0
        self._state_index = self.state_names.index("end") if done else step + 1
        return reward, done

    def render(self) -> None:
        """Print the payoff table, the current state and the last joint action (mode "human")."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() was called with render_mode=None; pass render_mode='human'")
            return
        state = "-" if self._state_index is None else self.state_names[self._state_index]
        print(f"{self.game} payoff (rows agent_0, columns agent_1):")
        print(np.array2string(self.payoff, precision=2, suppress_small=True))
        if self._branch is not None:
            state += f" branch {M_STEP_JOINT_ACTIONS[self._branch]}"
        print(f"state {state}  last joint action {self._last_actions}  reward {self._last_reward}")

    def close(self) -> None:
        pass
