"""User envs by object: register_env from Python and from a CLI plugin; one-line errors for unusable envs."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import NO_ACTOR, NO_ACTOR_FLAGS, error_lines
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv
from typer.testing import CliRunner

import semzoo
from semzoo.cli import app
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.envs.registry import make_env
from semzoo.runfiles import read_metrics


class MeetingEnv(ParallelEnv):
    """Two agents on a line of 5 cells, paid 1 per step they share a cell; the state is both positions."""

    metadata = {"name": "meeting_v0"}

    def __init__(self, size: int = 5, max_steps: int = 6) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.size, self.max_steps = size, max_steps
        self.state_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self._pos = np.zeros(2, np.int64)
        self._t = 0

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(3)  # left, stay, right

    def state(self):
        return (self._pos / (self.size - 1)).astype(np.float32)

    def reset(self, seed=None, options=None):
        rng = np.random.default_rng(seed)
        self._pos = rng.integers(0, self.size, 2)
        self._t = 0
        self.agents = list(self.possible_agents)
        return {a: self.state() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        for i, agent in enumerate(self.possible_agents):
            self._pos[i] = np.clip(self._pos[i] + actions[agent] - 1, 0, self.size - 1)
        self._t += 1
        reward = float(self._pos[0] == self._pos[1])
        done = self._t >= self.max_steps
        observations = {a: self.state() for a in self.agents}
        out = (observations, {a: reward for a in self.agents}, {a: False for a in self.agents},
               {a: done for a in self.agents}, {a: {} for a in self.agents})
        if done:
            self.agents = []
        return out


def test_env_class_from_this_file_trains_by_registered_name(tmp_path):
    semzoo.register_env("meeting", MeetingEnv)
    config = TrainConfig(**NO_ACTOR, env="meeting", env_args={"size": 4}, algo="qmix", steps=300, n_envs=4, test_episodes=8,
                         out=str(tmp_path), learner=LearnerConfig(batch_size=4, buffer_size=32))
    run_dir, result = semzoo.train(config, tensorboard=False)
    assert run_dir.name == "meeting_qmix_size=4_seed0"  # the env arguments in the name: a task of its own
    assert '"env": "meeting"' in (run_dir / "config.json").read_text()  # the config stays serialisable
    assert 0.0 <= result["test_return_mean"] <= 6.0
    assert {"loss", "test_return_mean"} <= {row["name"] for row in read_metrics(run_dir)}
    policy = semzoo.load_policy(run_dir)
    assert policy.agent_names == ("a", "b")


def test_register_env_refuses_semzoo_prefixes_and_silent_replacement():
    with pytest.raises(ValueError, match="semzoo's own ids"):
        semzoo.register_env("pz:mine", MeetingEnv)
    semzoo.register_env("meeting_twice", MeetingEnv)
    semzoo.register_env("meeting_twice", MeetingEnv)  # the same factory again is fine
    with pytest.raises(ValueError, match="already registered"):
        semzoo.register_env("meeting_twice", lambda: MeetingEnv())


def test_cli_trains_an_env_registered_by_a_plugin_module(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMZOO_PLUGINS", "plugin_envs")
    result = CliRunner().invoke(app, ["train", "--env", "plugin_coin_game", "--env-arg", "k=-5", "--algo", "vdn",
                                      "--steps", "100", "--out", str(tmp_path), "--batch-size", "4",
                                      "--buffer-size", "32", "--test-episodes", "8", *NO_ACTOR_FLAGS])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "plugin_coin_game_vdn_k=-5_seed0" / "final.json").exists()


def test_two_tasks_of_one_env_factory_get_run_directories_named_by_their_env_arguments(tmp_path):
    semzoo.register_env("meeting", MeetingEnv)
    names = []
    for env_args in ({"size": 4}, {"size": 6, "max_steps": 4}, {}):
        config = TrainConfig(**NO_ACTOR, env="meeting", env_args=env_args, algo="vdn", steps=48, n_envs=4,
                             test_episodes=4, out=str(tmp_path), learner=LearnerConfig(batch_size=4, buffer_size=16))
        names.append(semzoo.train(config, tensorboard=False, progress=False)[0].name)
    assert names == ["meeting_vdn_size=4_seed0", "meeting_vdn_max_steps=4_size=6_seed0", "meeting_vdn_seed0"]


def test_envs_lists_an_env_registered_by_a_plugin_module_with_its_arguments(monkeypatch):
    monkeypatch.setenv("SEMZOO_PLUGINS", "")  # restored after the test: --plugin names its module there too
    result = CliRunner().invoke(app, ["--plugin", "plugin_envs", "envs"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "plugin_coin_game" in line)
    assert "(k)" in line and "the penalty game under another name" in line


class NoStateEnv(MeetingEnv):
    state = ParallelEnv.state  # inherited, not implemented
    state_space = None


class StateAfterResetEnv(MeetingEnv):
    """No state_space, and state() only works once reset() placed the agents."""

    def __init__(self) -> None:
        super().__init__()
        del self.state_space
        self._pos = None

    def state(self):
        if self._pos is None:
            raise RuntimeError("call reset() first")
        return super().state()


@pytest.mark.parametrize(("factory", "needle"), [
    (NoStateEnv, "state() fails even after reset() (NotImplementedError"),
    (lambda: object(), "not a PettingZoo ParallelEnv"),
])
def test_env_without_a_usable_state_is_one_line_that_says_how_to_add_one(factory, needle):
    semzoo.register_env("bad_env", factory, overwrite=True)
    with pytest.raises(ValueError) as err:
        make_env("bad_env")
    message = str(err.value)
    assert needle in message and "\n" not in message
    if "state()" in needle:
        assert "give the env a state() method" in message


def test_env_whose_state_needs_reset_trains(tmp_path):
    semzoo.register_env("meeting_late_state", StateAfterResetEnv)
    config = TrainConfig(**NO_ACTOR, env="meeting_late_state", algo="vdn", steps=60, n_envs=2, test_episodes=2, out=str(tmp_path),
                         learner=LearnerConfig(batch_size=2, buffer_size=8))
    _, result = semzoo.train(config, tensorboard=False)
    assert "test_return_mean" in result


@pytest.mark.parametrize(("args", "needle"), [
    (("--env", "pz:pettingzoo.classic.tictactoe_v3:env"), "builds an AEC env"),
    (("--env", "pz:mpe2.simple_spread_v3:parallel_env", "--env-arg", "foo=1"),
     "unknown env argument 'foo'; its factory takes N, local_ratio, max_cycles"),
    (("--env", "matrix:climbing", "--env-arg", "foo=1"), "unknown env argument 'foo'; its factory takes payoff, k"),
    (("--env", "no_such_env"), "unknown env id 'no_such_env'"),
])
def test_cli_env_errors_are_one_line(tmp_path, args, needle):
    result = CliRunner().invoke(app, ["train", *args, "--steps", "10", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output


class StateGridEnv(MeetingEnv):
    """Declares its state as a [1, 2] Box and gives the integer cell of each agent in that shape."""

    def __init__(self) -> None:
        super().__init__()
        self.state_space = spaces.Box(0, 4, (1, 2), np.int64)

    def state(self):
        return self._pos.reshape(1, 2).copy()


@pytest.mark.parametrize(("env_class", "when", "got", "expected"), [
    ("StateGrowsEnv", "step 2", "shape (4,) and dtype float64", "shape (3,) (its state_space)"),
    ("StateTextEnv", "reset()", "shape (3,) and dtype <U1", "shape (3,) (its state_space)"),
])
def test_a_state_that_is_not_the_declared_flat_array_is_one_error_naming_the_env(fresh_registries, env_class, when,
                                                                                  got, expected):
    import contract_breakers

    from semzoo.wrappers.ctde import CTDEEnv

    env = CTDEEnv(getattr(contract_breakers, env_class)(), name="mine")
    with pytest.raises(ValueError) as err:
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.ones(2, np.int64))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"env 'mine' ({env_class}): state() returned an array of {got} after {when}; "
                              f"expected 3 numbers (float, int or bool), {expected}"), message


def test_a_state_in_its_declared_shape_and_integer_dtype_is_read_flat_as_float32():
    from semzoo.wrappers.ctde import CTDEEnv

    env = CTDEEnv(StateGridEnv())
    obs, _ = env.reset(seed=0)
    assert obs["state"].shape == (2,) and obs["state"].dtype == np.float32
    assert obs["state"].tolist() == env.env._pos.tolist()


@pytest.mark.parametrize(("env", "needle"), [
    ("state_grows", "env 'state_grows' (StateGrowsEnv): state() returned an array of shape (4,) and dtype float64 "
                    "after step 2; expected 3 numbers"),
    ("state_text", "env 'state_text' (StateTextEnv): state() returned an array of shape (3,) and dtype <U1 after "
                   "reset(); expected 3 numbers"),
])
def test_cli_names_the_env_whose_state_breaks_the_contract_in_one_line(tmp_path, fresh_registries, env, needle):
    result = CliRunner().invoke(app, ["--plugin", "contract_breakers", "train", "--env", env, "--algo", "vdn",
                                      "--steps", "60", "--out", str(tmp_path), *NO_ACTOR_FLAGS])
    assert result.exit_code == 1, result.output
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith(f"Error: {needle}"), lines[0]


def test_register_env_replace_is_the_keyword_of_every_registry():
    semzoo.register_env("meeting_replaced", MeetingEnv)
    semzoo.register_env("meeting_replaced", StateGridEnv, replace=True)
    assert isinstance(make_env("meeting_replaced"), StateGridEnv)


@pytest.mark.parametrize(("runtime", "warns"), [("pymarl", False), ("semzoo-0.2", True)])
def test_a_lambda_env_trains_in_the_default_runtime_without_a_word_and_on_a_thread_in_the_former(
        tmp_path, runtime, warns):
    """The README's claim: the default runtime collects in the main process, so a lambda factory needs nothing; the
    former runtime's actor process cannot import a lambda and collects on a thread, with a warning."""
    import warnings

    from semzoo.envs import matrix_game_v0

    semzoo.register_env(f"lambda_{runtime}", lambda: matrix_game_v0.parallel_env("custom", payoff=[[5, 0], [0, 3]]))
    config = TrainConfig(env=f"lambda_{runtime}", algo="vdn", steps=200, runtime=runtime, out=str(tmp_path),
                         test_interval=200, test_episodes=2, learner=LearnerConfig(batch_size=4, buffer_size=16))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        semzoo.train(config, progress=False, tensorboard=False)
    threaded = [w for w in caught if "collecting on a thread" in str(w.message)]
    assert bool(threaded) == warns, [str(w.message) for w in caught]
