"""The command line through typer's CliRunner."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from config_values import non_default_value
from conftest import NO_ACTOR_FLAGS
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import CLI, MemoryConfig, TrainConfig, config_fields
from semzoo.runfiles import read_metrics

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_short_train_run_writes_metrics(tmp_path):
    result = invoke("train", "--env", "matrix:climbing", "--algo", "vdn", "--steps", "200", "--out", str(tmp_path),
                    "--batch-size", "8", "--buffer-size", "64", "--test-episodes", "8", "--log-interval", "100")
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "matrix_climbing_vdn_seed0"
    assert {"loss", "test_return_mean"} <= {r["name"] for r in read_metrics(run_dir)}
    assert "greedy return" in result.output and "optimum 11" in result.output


def test_custom_payoff_passes_through_env_arg(tmp_path):
    result = invoke("train", "--env", "matrix:custom", "--env-arg", "payoff=[[8,-12],[-12,0]]", "--algo", "qmix",
                    "--steps", "100", "--out", str(tmp_path), "--batch-size", "4", "--buffer-size", "32",
                    "--test-episodes", "8", *NO_ACTOR_FLAGS)
    assert result.exit_code == 0, result.output
    assert "optimum 8" in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--env", "nope:thing"), "unknown env id 'nope:thing'"),
        (("--env", "matrix:not_a_game"), "not_a_game"),
        (("--algo", "dqn"), "unknown algorithm 'dqn'"),
        (("--steps", "-5"), "steps=-5"),
        (("--batch-size", "64", "--buffer-size", "32"), "batch_size=64 is larger than buffer_size=32"),
        (("--lam", "2"), "lam=2"),
        (("--env-arg", "oops"), "KEY=VALUE"),
    ],
)
def test_bad_input_is_a_one_line_error_without_traceback(tmp_path, args, needle):
    env = () if "--env" in args else ("--env", "matrix:climbing")
    result = invoke("train", "--out", str(tmp_path), *env, *args)
    assert result.exit_code in (1, 2)
    text = result.output.strip()
    assert needle in text
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text


def test_envs_lists_matrix_games():
    result = invoke("envs")
    assert result.exit_code == 0
    for game in ("climbing", "penalty", "qtran", "additive", "two_step", "m_step"):
        assert f"matrix:{game}" in result.output


@pytest.mark.parametrize(("args", "needle"), [(("train", "--bogus-flag"), "No such option: --bogus-flag"),
                                              (("train", "--steps", "abc"), "--steps")])
def test_console_usage_errors_are_one_line_with_exit_2(args, needle):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "semzoo.cli", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


# --- integer flags read numbers written as floats (1e6) when they are whole ---

def integer_flags() -> list[tuple[str, str]]:
    """(command, flag) of every option of every command that takes an integer (its placeholder INTEGER)."""
    import typer.main

    group = typer.main.get_command(app)
    return [(name, param.opts[0]) for name, command in sorted(group.commands.items()) for param in command.params
            if getattr(param, "metavar", None) == "INTEGER"]


def test_the_integer_flags_are_found():
    flags = integer_flags()
    assert {("train", "--memory-capacity"), ("train", "--steps"), ("evaluate", "--episodes"),
            ("memory-cost", "--agents"), ("sweep", "--seeds"), ("report", "--reps")} <= set(flags)


@pytest.mark.parametrize(("command", "flag"), integer_flags())
def test_every_integer_flag_refuses_a_fraction_naming_it(command, flag):
    result = invoke(command, flag, "1.5e0")
    assert result.exit_code == 2, result.output
    assert flag in result.output and "1.5e0 is not a whole number" in result.output, result.output


def test_memory_capacity_written_as_the_docs_write_it_trains(tmp_path):
    result = invoke("train", "--env", "matrix:two_step", "--memory-capacity", "1e6", "--steps", "2e1",
                    "--test-episodes", "2e0", "--out", str(tmp_path), "--run-name", "run", "--no-tensorboard")
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["memory"]["capacity"], config["steps"], config["test_episodes"]) == (1_000_000, 20, 2)


def test_memory_cost_and_evaluate_read_whole_numbers_written_as_floats(tmp_path):
    cost = invoke("memory-cost", "--agents", "3e0", "--actions", "9", "--state-size", "48", "--memory-capacity", "1e6")
    assert cost.exit_code == 0, cost.output
    assert invoke("train", "--env", "matrix:two_step", "--steps", "20", "--out", str(tmp_path), "--run-name", "run",
                  "--no-tensorboard").exit_code == 0
    replay = invoke("evaluate", str(tmp_path / "run"), "--episodes", "1e1")
    assert replay.exit_code == 0 and "10 greedy episodes" in replay.output, replay.output


# --- `train`'s flags are the config's fields ---

def train_command():
    import typer.main

    return typer.main.get_command(app).commands["train"]


def test_train_has_one_flag_per_config_field_with_its_default_and_help():
    from semzoo.cli import CLI_ONLY_OPTIONS, TRAIN_FIELDS, TRAIN_FLAGS

    params = {p.opts[0]: p for p in train_command().params}
    fields = TRAIN_FIELDS  # every config field but those the CLI fills (``pinned``)
    assert [f.key for f in config_fields() if f not in fields] == ["pinned"]
    assert sorted(params) == sorted([TRAIN_FLAGS[f.key] for f in fields] + [f"--{n}" for n in CLI_ONLY_OPTIONS])
    for f in fields:
        param = params[TRAIN_FLAGS[f.key]]
        default = dict(pair.split("=", 1) for pair in param.default) if f.type == dict[str, Any] else param.default
        assert default == f.default, f.key
        assert param.help and param.help.startswith(f.help), f.key


def test_todays_flag_names_keep_working():
    flags = {opt for p in train_command().params for opt in [*p.opts, *p.secondary_opts]}
    assert {"--memory-capacity", "--lam", "--proj-dim", "--pending-size", "--miss-rule", "--hidden-dim", "--env-arg",
            "--resume", "--tensorboard", "--no-tensorboard", "--double-q", "--no-double-q", "--steps",
            "--n-envs"} <= flags


@dataclass(frozen=True, kw_only=True)
class _Encoder:
    size: int = 1
    seed: int = 2


@dataclass(frozen=True, kw_only=True)
class _Decoder:
    size: int = 3
    depth: int = 4


@dataclass(frozen=True, kw_only=True)
class _Toy:
    seed: int = 0
    encoder: _Encoder = field(default_factory=_Encoder)
    decoder: _Decoder = field(default_factory=_Decoder)


def test_a_name_in_two_places_is_prefixed_with_its_section():
    from semzoo.cli import option_flags
    from semzoo.config import config_fields

    assert option_flags(config_fields(_Toy)) == {
        "seed": "--seed", "encoder.size": "--encoder-size", "encoder.seed": "--encoder-seed",
        "decoder.size": "--decoder-size", "decoder.depth": "--depth"}


@dataclass(frozen=True, kw_only=True)
class _Clash:
    memory_capacity: int = 1
    memory: MemoryConfig = field(default_factory=MemoryConfig)


def test_two_fields_with_one_flag_are_refused():
    from semzoo.cli import option_flags
    from semzoo.config import config_fields

    with pytest.raises(ValueError, match="--memory-capacity"):
        option_flags(config_fields(_Clash))


@pytest.fixture
def captured_config(monkeypatch, tmp_path):
    """Run `train` up to the trainer: the config it would train, without training or building the env."""
    import semzoo.cli.training
    import semzoo.run.trainer

    configs = []

    def fake_train(config, **kwargs):
        from semzoo.resolution import resolve

        configs.append(resolve(config).config)  # the CLI hands over the run resolved
        return tmp_path, {"test_return_mean": 0.0}

    monkeypatch.setattr(semzoo.run.trainer, "train", fake_train)
    monkeypatch.setattr(semzoo.cli.training, "_check_env", lambda config, typed=None: None)
    monkeypatch.setattr(semzoo.cli.training, "_check_env_args", lambda config, typed: None)  # judges env args
    monkeypatch.setattr(semzoo.cli.training, "_memory_plan", lambda config, runs=1, label="": config)  # it builds the env
    monkeypatch.setattr(semzoo.cli.training, "_report", lambda *args: None)
    return configs


def test_train_without_flags_is_the_default_config(captured_config):
    result = invoke("train")
    assert result.exit_code == 0, result.output
    # SMAC's rules on 3m, and the agents' mean reward (the team reward of every family but lbf:)
    assert captured_config == [replace(TrainConfig(), env_args={"profile": "smac"}, team_reward="mean")]


def cli_args(f, value) -> list[str]:
    from semzoo.cli import TRAIN_FLAGS

    flag = TRAIN_FLAGS[f.key]
    if f.type is bool:
        return [flag if value else f"--no-{flag[2:]}"]
    if isinstance(value, dict):
        return [arg for k, v in value.items() for arg in (flag, f"{k}={json.dumps(v)}")]
    return [flag, str(value)]


@pytest.mark.parametrize("f", [f for f in config_fields() if f.metadata.get(CLI, True)], ids=lambda f: f.key)
def test_every_config_field_is_settable_from_train(captured_config, f):
    value = non_default_value(f)
    result = invoke("train", *cli_args(f, value))
    assert result.exit_code == 0, result.output
    [config] = captured_config
    data = config.to_dict()
    section, _, name = f.key.rpartition(".")
    if f.key == "env_args":  # the default env, a SMAC map, takes SMAC's profile beside the arguments given
        value = {**value, "profile": "smac"}
    assert (data[section] if section else data)[name] == value


@pytest.mark.parametrize(("args", "needle"), [
    (("--updates-per-episode", "inf"), "updates_per_episode=inf: expected a finite number > 0"),
    (("--updates-per-episode", "nan"), "updates_per_episode=nan: expected a finite number > 0"),
    (("--grad-clip", "nan"), "grad_clip=nan: expected a finite number > 0"),
    (("--lr", "nan"), "lr=nan: expected a finite number > 0"),
    (("--lam", "-inf"), "lam=-inf: expected a finite number in [0, 1]"),
    (("--seed", "-1"), "seed=-1: expected an integer in [0, 4294967295]"),
    (("--device", "tpu"), "device='tpu': expected 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"),
])
def test_numbers_and_devices_that_would_hurt_a_run_are_usage_errors(tmp_path, args, needle):
    result = invoke("train", "--env", "matrix:climbing", "--out", str(tmp_path), *args)
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text == f"Error: {text[7:]}" and needle in text and len(text.splitlines()) == 1, text
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_a_visible_gpu_is_a_usage_error(tmp_path, monkeypatch, device):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = invoke("train", "--env", "matrix:climbing", "--out", str(tmp_path), "--device", device)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"Error: device '{device}': no CUDA GPU is visible; use --device cpu or --device auto"


def test_a_gpu_index_beyond_the_visible_ones_is_a_usage_error(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    result = invoke("train", "--env", "matrix:climbing", "--out", str(tmp_path), "--device", "cuda:3")
    assert result.exit_code == 2, result.output
    assert "device 'cuda:3': 1 CUDA GPU(s) visible, cuda:0 to cuda:0" in result.output


@pytest.mark.parametrize(("flag", "bad"), [("--updates-per-episode", "inf"), ("--updates-per-episode", "nan"),
                                         ("--grad-clip", "nan"), ("--lr", "nan")])
def test_console_refuses_nan_and_inf_with_exit_2(tmp_path, flag, bad):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", "--env", "matrix:climbing", "--out",
                           str(tmp_path), flag, bad], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and f"={bad}: expected" in lines[0], proc.stderr


def test_resume_names_the_flags_it_ignores(tmp_path):
    tiny = ["--env", "matrix:climbing", "--algo", "vdn", "--out", str(tmp_path), "--run-name", "run", "--steps", "40",
            "--n-envs", "4", "--batch-size", "4", "--buffer-size", "16", "--test-episodes", "4", "--no-tensorboard",
            *NO_ACTOR_FLAGS]
    assert invoke("train", *tiny).exit_code == 0
    result = invoke("train", "--resume", str(tmp_path / "run"), "--steps", "80", "--lr", "0.1", "--no-double-q",
                    "--no-tensorboard")
    assert result.exit_code == 0, result.output
    assert "Warning: --resume trains with the run's own config.json; ignoring --lr, --double-q" in result.output
    assert "after 80 steps" in result.output


def test_a_run_directory_given_to_resume_twice_is_a_usage_error_not_a_lock(tmp_path):
    tiny = ["--env", "matrix:climbing", "--algo", "vdn", "--out", str(tmp_path), "--run-name", "run", "--steps", "40",
            "--n-envs", "4", "--batch-size", "4", "--buffer-size", "16", "--test-episodes", "4", "--no-tensorboard",
            *NO_ACTOR_FLAGS]
    assert invoke("train", *tiny).exit_code == 0
    run_dir = tmp_path / "run"
    provenance = (run_dir / "provenance.json").read_text()
    result = invoke("train", "--resume", str(run_dir), "--resume", str(run_dir), "--steps", "80")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert f"--resume {run_dir} is given twice" in line and "another semzoo process" not in line
    assert (run_dir / "provenance.json").read_text() == provenance


def test_report_on_a_file_says_it_is_a_file(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("env_steps\n")
    result = invoke("report", str(path))
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "is a file, not a folder" in line and "does not exist" not in line


def test_broken_json_in_an_env_arg_is_named():
    result = invoke("train", "--env", "matrix:custom", "--env-arg", "payoff=[[1,2],[3")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "payoff=[[1,2],[3 is not valid JSON" in line and "dtype" not in line


def test_an_unknown_env_arg_gets_no_note_about_strings():
    result = invoke("train", "--env", "matrix:two_step", "--env-arg", "reward=sparse")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "unknown env argument 'reward'" in line and "read as a string" not in line


def test_a_choice_given_in_the_wrong_case_is_one_line_without_a_validator_prefix():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", "--runtime", "PyMARL"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: Invalid value for '--runtime': 'PyMARL' is not one of"), line
    assert "Value error" not in line


# ----- a missing optional part: one line, exit 1, in every command -------------------------------------------------


def assert_missing_part(result, *needles: str) -> None:
    """Exit 1 (an error of the user's environment) with one ``Error:`` line on stderr holding every needle."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def hide_modules(monkeypatch, *names: str) -> None:
    """Make ``import name`` (and of its submodules) raise ImportError in this process, as if not installed."""
    import sys

    for loaded in [m for m in sys.modules if m.partition(".")[0] in names]:
        monkeypatch.setitem(sys.modules, loaded, None)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def test_smac_without_starcraft_is_one_line_from_the_installed_command(tmp_path):
    """The console script (not CliRunner): what a user without StarCraft II sees; it was a 53-line traceback."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("smac") is not None:
        pytest.skip("oxwhirl SMAC is installed here")
    done = subprocess.run([sys.executable, "-c", "from semzoo.cli import main; main()", "train", "--env", "smac:3m",
                           "--steps", "10", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: oxwhirl SMAC is not installed; install it with `pip install git+")
    assert not list(tmp_path.iterdir())  # refused before a run directory was made


def test_smax_without_jaxmarl_names_the_extra(monkeypatch, tmp_path):
    import semzoo.envs
    import semzoo.envs.smax  # loaded first, so that the undo restores jaxmarl and SMAX whole for later tests

    hide_modules(monkeypatch, "jaxmarl")
    for module in ("semzoo.envs.smax", "semzoo.envs.smax_core", "semzoo.envs.smax_vec", "semzoo.envs.smac_jax"):
        monkeypatch.delitem(__import__("sys").modules, module, raising=False)  # imported again without it
    monkeypatch.delattr(semzoo.envs, "smax", raising=False)
    for args in (["train", "--env", "smax:3m", "--steps", "10", "--out", str(tmp_path)],
                 ["memory-cost", "smax:3m"]):
        assert_missing_part(invoke(*args), "SMAX needs jaxmarl", "pip install 'semzoo[smax]'")


def test_sweep_without_ray_names_the_extra(monkeypatch, tmp_path):
    hide_modules(monkeypatch, "ray")
    result = invoke("sweep", "--envs", "matrix:climbing", "--algos", "vdn", "--seeds", "1", "--steps", "20",
                    "--out", str(tmp_path))
    assert_missing_part(result, "sweeps run on Ray, which is not installed: pip install 'semzoo[ray]'")


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    result = invoke("train", "--env", "matrix:penalty", "--algo", "vdn", "--steps", "40", "--out", str(tmp_path),
                    "--batch-size", "4", "--buffer-size", "16", "--test-episodes", "4", "--test-interval", "20",
                    *NO_ACTOR_FLAGS)
    assert result.exit_code == 0, result.output
    hide_modules(monkeypatch, "matplotlib")
    assert_missing_part(invoke("plot", str(tmp_path)), "plots need matplotlib", "pip install 'semzoo[plot]'")


@pytest.mark.parametrize("where", ["option", "variable"])
def test_a_plugin_module_that_does_not_import_is_one_line(monkeypatch, fresh_registries, where):
    if where == "option":
        result = invoke("--plugin", "no_such_plugin_module", "algos")
    else:  # named in SEMZOO_PLUGINS, imported when an id is first looked up
        monkeypatch.setenv("SEMZOO_PLUGINS", "no_such_plugin_module")
        result = invoke("algos")
    assert_missing_part(result, "plugin module 'no_such_plugin_module' cannot be imported", "PYTHONPATH")


@pytest.mark.parametrize("error", ["raise RuntimeError('boom at import')", "1 / 0", "def broken(:"])
def test_a_plugin_that_raises_anything_on_import_is_one_line_naming_it(monkeypatch, tmp_path, fresh_registries, error):
    (tmp_path / "raising_plugin.py").write_text(f"import semzoo\n\n{error}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "raising_plugin", raising=False)
    result = invoke("--plugin", "raising_plugin", "algos")
    assert_missing_part(result, "plugin module 'raising_plugin' failed while importing", "line 3")
    assert "raising_plugin.py line 3" in result.stderr


PATH_PLUGIN = """import functools

import semzoo
from semzoo.envs import matrix_game_v0

semzoo.register_env("path_plugin_game", functools.partial(matrix_game_v0.parallel_env, "climbing"))
"""


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_plugin_given_as_a_file_is_imported_before_or_after_the_command(monkeypatch, tmp_path, fresh_registries,
                                                                          where):
    from semzoo.envs.registry import registered_factory

    (tmp_path / "path_plugin.py").write_text(PATH_PLUGIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "path_plugin", raising=False)
    flags = ["--plugin", "./path_plugin.py"]
    result = invoke(*flags, "algos") if where == "before" else invoke("algos", *flags)
    assert result.exit_code == 0, result.output
    assert registered_factory("path_plugin_game") is not None
    assert os.environ["SEMZOO_PLUGINS"] == str(tmp_path / "path_plugin.py")  # absolute: a child finds it too
    sys.modules.pop("path_plugin", None)


def test_a_plugin_flag_without_a_value_is_one_usage_line():
    result = invoke("algos", "--plugin")
    assert result.exit_code == 2 and "--plugin needs a value" in result.output, result.output


def test_a_plugin_file_that_does_not_exist_says_what_plugin_takes(fresh_registries):
    assert_missing_part(invoke("--plugin", "./no_such_file.py", "algos"), "plugin file", "does not exist",
                        "--plugin my_memory")


def test_an_import_error_inside_a_users_env_factory_is_one_line(monkeypatch, tmp_path, fresh_registries):
    import semzoo

    def factory():
        import no_such_simulator  # noqa: F401

    semzoo.register_env("needs_a_simulator", factory)
    result = invoke("train", "--env", "needs_a_simulator", "--out", str(tmp_path))
    assert_missing_part(result, "No module named 'no_such_simulator'", "a module did not import")
