"""SMACParallelEnv against a fake object that behaves as SMAC's StarCraft2Env documents, the SC2 setup
errors, and the SMAC map table."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test
from pettingzoo.utils.conversions import parallel_to_aec

from semzoo.envs.maps import PAPER_MAPS, SMAC_MAPS, UnknownMapError, map_table, smac_map
from semzoo.wrappers import smac as smac_wrapper
from semzoo.wrappers.smac import SMACParallelEnv, SMACUnavailableError

N_NON_ATTACK = 6
WIN_REWARD = 10.0


class FakeSMAC:
    """A scripted battle with SMAC's interface and SMAC's end-of-episode behaviour.

    ``ally_deaths`` / ``enemy_deaths`` map a step number to the units killed during that step.
    At the episode limit SMAC returns terminated=True and adds ``info["episode_limit"]`` only
    with ``continuing_episode``; a crashed StarCraft II returns ``(0, True, {})``.
    """

    def __init__(
        self,
        map_name: str = "3m",
        n_agents: int = 3,
        n_enemies: int = 3,
        episode_limit: int = 6,
        continuing_episode: bool = False,
        ally_deaths: dict[int, list[int]] | None = None,
        enemy_deaths: dict[int, list[int]] | None = None,
        crash_at: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.map_name = map_name
        self.n_agents, self.n_enemies = n_agents, n_enemies
        self.n_actions = N_NON_ATTACK + n_enemies
        self.episode_limit = episode_limit
        self.continuing_episode = continuing_episode
        self.ally_deaths = ally_deaths or {}
        self.enemy_deaths = enemy_deaths or {}
        self.crash_at = crash_at
        self._seed = seed
        self.received_actions: list[list[int]] = []
        self.closed = False
        self.battles_won = self.battles_game = 0
        self.reset()

    def seed(self) -> int | None:  # SMAC's seed() takes no argument and returns the seed
        return self._seed

    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        self.steps = 0
        self.ally_alive = np.ones(self.n_agents, dtype=bool)
        self.enemy_alive = np.ones(self.n_enemies, dtype=bool)
        return self.get_obs(), self.get_state()

    def step(self, actions: list[int]) -> tuple[float, bool, dict[str, Any]]:
        self.received_actions.append(list(actions))
        for i, a in enumerate(actions):
            assert self.get_avail_agent_actions(i)[a] == 1, f"agent {i} cannot take action {a}"
        self.steps += 1
        if self.crash_at == self.steps:
            return 0, True, {}
        self.ally_alive[self.ally_deaths.get(self.steps, [])] = False
        self.enemy_alive[self.enemy_deaths.get(self.steps, [])] = False
        info: dict[str, Any] = {
            "battle_won": False,
            "dead_allies": int((~self.ally_alive).sum()),
            "dead_enemies": int((~self.enemy_alive).sum()),
        }
        reward = 1.0
        terminated = False
        if not self.ally_alive.any() or not self.enemy_alive.any():
            terminated = True
            self.battles_game += 1
            if self.ally_alive.any():
                info["battle_won"] = True
                self.battles_won += 1
                reward += WIN_REWARD
        elif self.steps >= self.episode_limit:
            terminated = True
            self.battles_game += 1
            if self.continuing_episode:
                info["episode_limit"] = True
        return reward, terminated, info

    def get_obs_agent(self, i: int) -> np.ndarray:
        if not self.ally_alive[i]:
            return np.zeros(4, dtype=np.float32)
        return np.array([i, self.steps, 0.5, -0.5], dtype=np.float32)

    def get_obs(self) -> list[np.ndarray]:
        return [self.get_obs_agent(i) for i in range(self.n_agents)]

    def get_state(self) -> np.ndarray:
        return np.concatenate([self.ally_alive, self.enemy_alive]).astype(np.float32) * self.steps

    def get_avail_agent_actions(self, i: int) -> list[int]:
        if not self.ally_alive[i]:
            return [1] + [0] * (self.n_actions - 1)
        return [0] + [1] * (N_NON_ATTACK - 1) + self.enemy_alive.astype(int).tolist()

    def get_avail_actions(self) -> list[list[int]]:
        return [self.get_avail_agent_actions(i) for i in range(self.n_agents)]

    def get_env_info(self) -> dict[str, int]:
        return {
            "n_agents": self.n_agents,
            "n_actions": self.n_actions,
            "obs_shape": 4,
            "state_shape": self.n_agents + self.n_enemies,
            "episode_limit": self.episode_limit,
        }

    def get_stats(self) -> dict[str, float]:
        return {"battles_won": self.battles_won, "battles_game": self.battles_game}

    def close(self) -> None:
        self.closed = True


def stop_all(env: SMACParallelEnv) -> dict[str, int]:
    return {a: 1 for a in env.agents}  # SMAC action 1 = stop, always available to a living unit


def run_episode(env: SMACParallelEnv) -> list[tuple[dict, dict, dict, dict, dict]]:
    env.reset()
    steps = []
    while env.agents:
        steps.append(env.step(stop_all(env)))
    return steps


def test_parallel_api_test_passes_on_fake_smac():
    env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [1]}, enemy_deaths={3: [0]}), unit_types=["marine"] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # parallel_api_test warns on key mismatches: make them fail
        warnings.filterwarnings("ignore", message=".*cannot be reseeded.*")
        parallel_api_test(env, num_cycles=50)


def test_aec_api_test_passes_on_fake_smac():
    env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [1]}))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*cannot be reseeded.*")
        api_test(parallel_to_aec(env), num_cycles=50)


def test_dead_agent_leaves_agents_and_backend_gets_noop_for_it():
    fake = FakeSMAC(ally_deaths={2: [1]})
    env = SMACParallelEnv(fake)
    env.reset()
    env.step(stop_all(env))
    _, rewards, terms, _truncs, _ = env.step(stop_all(env))
    assert terms == {"agent_0": False, "agent_1": True, "agent_2": False}
    assert set(rewards) == {"agent_0", "agent_1", "agent_2"}  # the dying agent still gets this step
    assert env.agents == ["agent_0", "agent_2"]
    obs, *_ = env.step({"agent_0": 1, "agent_2": 1})
    assert set(obs) == {"agent_0", "agent_2"}
    assert fake.received_actions[-1] == [1, 0, 1]  # no-op sent for the dead agent


@pytest.mark.parametrize("continuing_episode", [False, True])
def test_episode_limit_is_truncation_with_or_without_continuing_episode(continuing_episode):
    env = SMACParallelEnv(FakeSMAC(episode_limit=4, continuing_episode=continuing_episode))
    steps = run_episode(env)
    assert len(steps) == 4
    _, _, terms, truncs, infos = steps[-1]
    assert not any(terms.values())
    assert all(truncs.values())
    assert all(i["episode_limit"] and not i["battle_won"] and not i["sc2_crashed"] for i in infos.values())


def test_win_is_termination_with_battle_won_and_death_counts():
    env = SMACParallelEnv(FakeSMAC(enemy_deaths={1: [0], 3: [1, 2]}, ally_deaths={2: [0]}))
    steps = run_episode(env)
    _, rewards, terms, truncs, infos = steps[-1]
    assert len(steps) == 3
    assert all(terms.values()) and not any(truncs.values())
    info = infos["agent_1"]
    assert info["battle_won"] and info["dead_enemies"] == 3 and info["dead_allies"] == 1
    assert rewards["agent_1"] == 1.0 + WIN_REWARD


def test_loss_on_the_last_step_is_termination_not_timeout():
    env = SMACParallelEnv(FakeSMAC(episode_limit=3, ally_deaths={3: [0, 1, 2]}))
    steps = run_episode(env)
    _, _, terms, truncs, infos = steps[-1]
    assert all(terms.values()) and not any(truncs.values())
    assert not infos["agent_0"]["battle_won"] and not infos["agent_0"]["episode_limit"]


def test_sc2_crash_is_truncation_flagged_not_a_loss():
    env = SMACParallelEnv(FakeSMAC(crash_at=3))
    env.reset()
    env.step(stop_all(env))
    before_obs, *_ = env.step(stop_all(env))
    state_before = env.state().copy()
    obs, rewards, terms, truncs, infos = env.step(stop_all(env))
    assert not any(terms.values()) and all(truncs.values())
    assert all(i["sc2_crashed"] and not i["battle_won"] for i in infos.values())
    assert set(rewards.values()) == {0.0}
    assert env.agents == []
    # the backend restarted the game: the wrapper keeps the last real observation and state
    np.testing.assert_array_equal(obs["agent_0"]["observation"], before_obs["agent_0"]["observation"])
    np.testing.assert_array_equal(env.state(), state_before)


def test_spaces_are_cached_and_state_lies_in_state_space():
    env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [2]}), state_bounds=(0.0, 10.0))
    assert env.observation_space("agent_0") is env.observation_space("agent_0")
    assert env.action_space("agent_0") is env.action_space("agent_0")
    obs, _ = env.reset()
    while env.agents:
        assert env.state() in env.state_space
        for a, o in obs.items():
            assert o in env.observation_space(a)
        obs, *_ = env.step(stop_all(env))
    assert env.state() in env.state_space


def test_an_unavailable_action_is_refused_naming_the_agent_by_its_pettingzoo_name():
    fake = FakeSMAC()
    env = SMACParallelEnv(fake, unit_types=["marine"] * 3)
    env.reset()
    with pytest.raises(ValueError, match=r"^marine_1 cannot take action 0; available: \[1, 2, 3, 4, 5, 6, 7, 8\]; .*"
                                         r"unavailable_action='stop'"):
        env.step({"marine_0": 1, "marine_1": 0, "marine_2": 1})  # the no-op is for dead units only
    assert fake.received_actions == []  # refused before the backend saw it (SMAC would assert)


def test_unavailable_action_stop_makes_the_unit_stop_and_still_refuses_actions_outside_the_space():
    fake = FakeSMAC(enemy_deaths={1: [2]})
    env = SMACParallelEnv(fake, unavailable_action="stop")
    env.reset()
    env.step({"agent_0": 0, "agent_1": 8, "agent_2": 8})  # the no-op of a live unit; attacks on enemy 2, alive
    env.step({"agent_0": 0, "agent_1": 8, "agent_2": 4})  # enemy 2 died: attacking it is unavailable now
    assert fake.received_actions == [[1, 8, 8], [1, 1, 4]]
    with pytest.raises(ValueError, match=r"^agent_0: action 9 is outside its action space Discrete\(9\)"):
        env.step({"agent_0": 9, "agent_1": 1, "agent_2": 1})


def test_unknown_unavailable_action_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"^unavailable_action='noop': expected 'error' .* or 'stop'"):
        SMACParallelEnv(FakeSMAC(), unavailable_action="noop")


@pytest.mark.parametrize("obs_format", ["dict", "box"])
@pytest.mark.filterwarnings("ignore:.*cannot be reseeded")
def test_pettingzoo_checkers_pass_with_unavailable_actions_played_as_stop(obs_format):
    """Both checkers sample without the mask (the API test reads it from dict observations only)."""
    def make() -> SMACParallelEnv:
        return SMACParallelEnv(FakeSMAC(ally_deaths={2: [1]}, enemy_deaths={3: [0]}), obs_format=obs_format,
                               unavailable_action="stop")

    parallel_api_test(make(), num_cycles=50)
    parallel_seed_test(make)


def test_missing_action_for_live_agent_raises():
    env = SMACParallelEnv(FakeSMAC())
    env.reset()
    with pytest.raises(ValueError, match="agent_2"):
        env.step({"agent_0": 1, "agent_1": 1})


def test_step_after_episode_end_raises_unless_it_has_no_actions():
    env = SMACParallelEnv(FakeSMAC(episode_limit=1))
    run_episode(env)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 1})
    # No agent and no action: an empty no-op step, as MPE gives (SuperSuit's black_death_v3 takes one to end).
    assert env.step({}) == ({}, {}, {}, {}, {})


STEP_INFO_KEYS = {"battle_won", "dead_allies", "dead_enemies", "episode_limit", "sc2_crashed"}


@pytest.mark.parametrize("obs_format", ["dict", "box"])
def test_reset_infos_have_the_keys_of_every_step_with_their_start_values(obs_format):
    """TorchRL builds its info spec from reset(): keys that only step() returned never reached its users."""
    env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [1]}, enemy_deaths={3: [0]}, crash_at=5), obs_format=obs_format)
    expected = STEP_INFO_KEYS | ({"action_mask"} if obs_format == "box" else set())
    _, infos = env.reset()
    for info in infos.values():
        assert set(info) == expected
        assert (info["battle_won"], info["dead_allies"], info["dead_enemies"]) == (False, 0, 0)
        assert not info["episode_limit"] and not info["sc2_crashed"]
    steps = run_episode(env)
    assert steps[-1][4]["agent_0"]["sc2_crashed"]  # the crash step (SMAC's empty info) keeps the keys too
    assert steps[-1][4]["agent_0"]["dead_enemies"] == 1
    for *_, step_infos in steps:
        for info in step_infos.values():
            assert set(info) == expected


def test_box_format_gives_flat_observations_and_the_mask_in_infos():
    env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [2]}), obs_format="box")
    dict_env = SMACParallelEnv(FakeSMAC(ally_deaths={2: [2]}))
    assert env.observation_space("agent_0") is env.observation_space("agent_0")
    assert env.observation_space("agent_0") == dict_env.observation_space("agent_0")["observation"]
    obs, infos = env.reset()
    dict_obs, _ = dict_env.reset()
    while env.agents:
        for a in env.agents:
            assert obs[a] in env.observation_space(a)
            np.testing.assert_array_equal(obs[a], dict_obs[a]["observation"])
            np.testing.assert_array_equal(infos[a]["action_mask"], dict_obs[a]["action_mask"])
        obs, _, _, _, infos = env.step(stop_all(env))
        dict_obs, *_ = dict_env.step(stop_all(dict_env))
    # parallel_api_test reads masks only from dict observations, so on box observations it plays unavailable
    # actions, which SMAC (and this fake) refuse: it runs with unavailable_action="stop" (below).


def test_unknown_obs_format_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"obs_format='flat'.*'dict'.*'box'"):
        SMACParallelEnv(FakeSMAC(), obs_format="flat")


def test_factory_and_unit_type_names():
    env = SMACParallelEnv(lambda: FakeSMAC(n_agents=5, n_enemies=5), unit_types=["stalker"] * 2 + ["zealot"] * 3)
    assert env.possible_agents == ["stalker_0", "stalker_1", "zealot_0", "zealot_1", "zealot_2"]
    assert SMACParallelEnv(FakeSMAC()).possible_agents == ["agent_0", "agent_1", "agent_2"]


def test_reset_seed_warns_when_backend_cannot_be_reseeded_and_seeds_when_it_can():
    env = SMACParallelEnv(FakeSMAC())
    with pytest.warns(UserWarning, match="cannot be reseeded"):
        env.reset(seed=3)

    class Seedable(FakeSMAC):
        def seed(self, seed: int) -> None:  # type: ignore[override]
            self._seed = seed

    fake = Seedable()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SMACParallelEnv(fake).reset(seed=11)
    assert fake._seed == 11


def test_close_reaches_backend():
    fake = FakeSMAC()
    SMACParallelEnv(fake).close()
    assert fake.closed


def test_object_without_smac_interface_is_rejected():
    with pytest.raises(TypeError, match="SMAC"):
        SMACParallelEnv(object())


# --- StarCraft II setup errors --------------------------------------------------------------------------
def install_fake_smac(monkeypatch, registry: dict[str, dict] | None = None) -> None:
    """Put an oxwhirl-SMAC look-alike in sys.modules whose StarCraft2Env is FakeSMAC."""
    smac = types.ModuleType("smac")
    env_mod = types.ModuleType("smac.env")
    env_mod.StarCraft2Env = FakeSMAC  # type: ignore[attr-defined]
    sc2_mod = types.ModuleType("smac.env.starcraft2")
    maps_mod = types.ModuleType("smac.env.starcraft2.maps")
    maps_mod.get_smac_map_registry = lambda: registry or {"3m": {}, "2s3z": {}}  # type: ignore[attr-defined]
    for name, mod in [
        ("smac", smac),
        ("smac.env", env_mod),
        ("smac.env.starcraft2", sc2_mod),
        ("smac.env.starcraft2.maps", maps_mod),
    ]:
        monkeypatch.setitem(sys.modules, name, mod)


def make_sc2_dir(tmp_path, maps=("3m", "2s3z")):
    maps_dir = tmp_path / "StarCraftII" / "Maps" / "SMAC_Maps"
    maps_dir.mkdir(parents=True)
    for m in maps:
        (maps_dir / f"{m}.SC2Map").write_bytes(b"")
    return tmp_path / "StarCraftII"


def test_missing_smac_error_gives_install_command_and_sc2_version(monkeypatch):
    monkeypatch.setitem(sys.modules, "smac", None)  # import smac -> ImportError
    with pytest.raises(SMACUnavailableError, match=r"oxwhirl/smac.git") as err:
        smac_wrapper.make_sc2_env("3m")
    assert "4.6.2.69232" in str(err.value) and "\n" not in str(err.value)


def test_smac3_installed_instead_is_detected(monkeypatch):
    monkeypatch.setitem(sys.modules, "smac", types.ModuleType("smac"))
    monkeypatch.setitem(sys.modules, "smac.env", None)  # SMAC3 has no smac.env
    with pytest.raises(SMACUnavailableError, match="SMAC3"):
        smac_wrapper.make_sc2_env("3m")


def test_unknown_map_lists_known_maps(monkeypatch, tmp_path):
    install_fake_smac(monkeypatch)
    monkeypatch.setenv("SC2PATH", str(make_sc2_dir(tmp_path)))
    with pytest.raises(UnknownMapError, match="available: 2s3z, 3m"):
        smac_wrapper.make_sc2_env("4m_vs_nothing")


def test_unset_sc2path_without_default_install_is_an_error(monkeypatch, tmp_path):
    install_fake_smac(monkeypatch)
    monkeypatch.delenv("SC2PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/StarCraftII there
    with pytest.raises(SMACUnavailableError, match="SC2PATH is not set"):
        smac_wrapper.make_sc2_env("3m")


def test_sc2path_pointing_nowhere_is_an_error(monkeypatch, tmp_path):
    install_fake_smac(monkeypatch)
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_such_dir"))
    with pytest.raises(SMACUnavailableError, match="not a directory"):
        smac_wrapper.make_sc2_env("3m")


def test_missing_map_file_names_the_smac_maps_folder(monkeypatch, tmp_path):
    install_fake_smac(monkeypatch)
    monkeypatch.setenv("SC2PATH", str(make_sc2_dir(tmp_path, maps=("3m",))))
    with pytest.raises(SMACUnavailableError, match="SMAC_Maps"):
        smac_wrapper.make_sc2_env("2s3z")


def test_sc2_parallel_env_builds_starcraft2env_with_kwargs_and_unit_names(monkeypatch, tmp_path):
    install_fake_smac(monkeypatch)
    monkeypatch.setenv("SC2PATH", str(make_sc2_dir(tmp_path)))
    env = smac_wrapper.parallel_env("2s3z", n_agents=5, n_enemies=5, continuing_episode=True)
    assert isinstance(env.smac_env, FakeSMAC) and env.smac_env.continuing_episode
    assert env.possible_agents == ["stalker_0", "stalker_1", "zealot_0", "zealot_1", "zealot_2"]


# --- map facts ------------------------------------------------------------------------------------------
# Sizes SMAC reports (SMAC paper / PyMARL logs), independent of semzoo's formulas.
PUBLISHED_SIZES = {
    "3m": (30, 48, 9),
    "8m": (80, 168, 14),
    "2s3z": (80, 120, 11),
    "3s5z": (128, 216, 14),
    "MMM2": (176, 322, 18),
    "27m_vs_30m": (285, 1170, 36),
    "2c_vs_64zg": (332, 342, 70),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_SIZES))
def test_map_sizes_match_smac(name):
    m = smac_map(name)
    assert (m.obs_dim, m.state_dim, m.n_actions) == PUBLISHED_SIZES[name]


def test_paper_maps_are_known_and_smax_has_three_of_them():
    assert all(name in SMAC_MAPS for name in PAPER_MAPS)
    in_smax = [name for name in PAPER_MAPS if "smax" in SMAC_MAPS[name].backends]
    assert in_smax == ["2s3z", "3s5z", "27m_vs_30m"]


def test_map_table_rows_and_backend_filter():
    rows = {r["map"]: r for r in map_table()}
    assert rows["MMM2"]["agents"] == 10 and rows["MMM2"]["episode_limit"] == 180
    assert rows["MMM2"]["smax_state_dim"] is None
    with pytest.raises(UnknownMapError, match=r"available: .*27m_vs_30m"):
        smac_map("MMM2", backend="smax")
