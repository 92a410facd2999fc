"""A component's own settings: a user memory with a setting of its own, declared beside it in one file
(tests/plugins/toy_memory_plugin.py: ``best.bonus``), set from the CLI with ``--set``, stored in config.json,
listed by `semzoo algos`, and read by the memory; and the refusals of bad settings."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import plugin_process_env
from typer.testing import CliRunner

from semzoo.algos import make_run_mixer, parse_algorithm
from semzoo.cli import app
from semzoo.config import NON_NEGATIVE, TrainConfig, component_fields, ranged, register_settings
from semzoo.episodic.memory import memory_class
from semzoo.episodic.setup import MemorySetup
from semzoo.plugins import PLUGINS_ENV
from semzoo.resolution import resolve
from semzoo.runfiles import read_run_config as load_config
from semzoo.runfiles import run_variant

PLUGINS = Path(__file__).parent / "plugins"
TINY = ["--env", "matrix:two_step", "--steps", "64", "--n-envs", "8", "--no-sequential", "--log-interval", "32",
        "--test-interval", "64", "--test-episodes", "4", "--batch-size", "8", "--buffer-size", "32",
        "--device", "cpu", "--no-tensorboard"]


@pytest.fixture
def toy(monkeypatch):
    """The plugin imported as a user's code would be; ``--plugin`` names it in SEMZOO_PLUGINS, put back after."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv(PLUGINS_ENV, "")  # set, not deleted: monkeypatch restores only what it set
    import toy_memory_plugin

    return toy_memory_plugin


def invoke(*args: str):
    return CliRunner().invoke(app, ["--plugin", "toy_memory_plugin", *args])


def one_line_usage_error(result, needle: str) -> None:
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert needle in text and "Traceback" not in text and len(text.splitlines()) == 1, text


def test_a_user_memory_with_a_setting_of_its_own_trains_through_the_cli_with_it(tmp_path, toy):
    cli = [sys.executable, "-m", "semzoo.cli", "--plugin", "toy_memory_plugin"]
    env = plugin_process_env()
    listing = subprocess.run([*cli, "algos"], capture_output=True, text=True, env=env, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "best.bonus=0.01" in listing.stdout and "--set KEY=VALUE" in listing.stdout
    done = subprocess.run([*cli, "train", *TINY, "--algo", "best-qmix", "--set", "best.bonus=0.05", "--out",
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "matrix_two_step_best-qmix_seed0"
    stored = json.loads((run_dir / "config.json").read_text())
    assert stored["best"] == {"bonus": 0.05} and "best.bonus" in stored["pinned"]
    config = load_config(run_dir)
    assert config.settings("best") == toy.BestSettings(bonus=0.05)
    memory = memory_class("best").from_config(MemorySetup.of(config, state_dim=4, n_agents=2, n_actions=2, obs_dim=4))
    assert memory.bonus == 0.05 and memory.lookup_batch(None, None).bonus.item() == pytest.approx(0.05)


def test_a_memory_is_built_from_its_part_of_the_run_and_never_the_whole_config(toy, monkeypatch):
    """``make_memory`` (what ``algos.build`` calls) hands the memory a MemorySetup: its own section and the shared
    memory section, but not the mixer's or the learner-row's settings, the exploration, the runtime or the loop's."""
    from semzoo.episodic.memory import make_memory
    from semzoo.episodic.setup import MemorySetup

    config = TrainConfig(env="matrix:two_step", algo="best-cw-qmix", components={"best": toy.BestSettings(bonus=0.2)})
    assert set(config.components) == {"best", "qmix", "wqmix"}
    seen = []
    built = toy.BestReturnMemory.from_config

    def recording(setup):
        seen.append(setup)
        return built(setup)

    monkeypatch.setattr(toy.BestReturnMemory, "from_config", staticmethod(recording))
    memory = make_memory("best", config, state_dim=4, n_agents=2, n_actions=2, obs_dim=3)
    (setup,) = seen
    assert isinstance(setup, MemorySetup) and memory.bonus == 0.2
    assert dict(setup.own) == {"best": toy.BestSettings(bonus=0.2)} and setup.sizes == {
        "state_dim": 4, "n_agents": 2, "n_actions": 2, "obs_dim": 3}
    fields = {f.name for f in dataclasses.fields(MemorySetup)}
    assert not fields & {"components", "exploration", "runtime", "preset", "n_envs", "steps", "algo", "env_args"}
    with pytest.raises(KeyError, match=r"'wqmix'.*expected one of \['best'\]"):
        setup.settings("wqmix")


def test_a_user_mixer_with_a_setting_of_its_own_trains_through_the_cli_with_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv(PLUGINS_ENV, "")
    import scaled_mixer_plugin

    cli = [sys.executable, "-m", "semzoo.cli", "--plugin", "scaled_mixer_plugin"]
    done = subprocess.run([*cli, "train", *TINY, "--algo", "sem-scaled", "--set", "scaled.scale=0.5", "--out",
                           str(tmp_path)], capture_output=True, text=True, env=plugin_process_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    config = load_config(tmp_path / "matrix_two_step_sem-scaled_seed0")
    assert config.to_dict()["scaled"] == {"scale": 0.5} and "scaled.scale" in config.pinned
    mixer = make_run_mixer(config, resolve(config).algo, SimpleNamespace(n_agents=2, state_dim=4, n_actions=3))
    assert isinstance(mixer, scaled_mixer_plugin.ScaledVDN) and mixer.scale == 0.5
    qs = torch.ones(1, 1, 2)
    assert mixer(qs, torch.zeros(1, 1, 4)).item() == 1.0  # 0.5 * (1 + 1)
    assert make_run_mixer(TrainConfig(algo="scaled"), parse_algorithm("scaled"), SimpleNamespace(n_agents=2, state_dim=4, n_actions=3)).scale == 1


def test_the_docs_count_one_file_for_a_plugin_memory_or_mixer_with_settings():
    """docs/architecture.md's row for each says 1 file (a plugin module) and names ``settings=``; the two test plugins
    are such files: each, imported alone, registers its component and that component's settings section."""
    page = (PLUGINS.parents[1] / "docs" / "architecture.md").read_text()
    for row in ("| a mixer | 1 (a plugin module)", "| an episodic memory (EMC, EMU, a SEM variant, ...) | 1 (a plugin module"):
        line = next(line for line in page.splitlines() if line.startswith(row))
        assert "settings=" in line, line
    code = ("import sys, {m}; from semzoo.config import BUILTIN_COMPONENTS, registered_components; "
            "print(sorted(registered_components().keys() - BUILTIN_COMPONENTS))")
    for module, section in (("toy_memory_plugin", "best"), ("scaled_mixer_plugin", "scaled")):
        done = subprocess.run([sys.executable, "-c", code.format(m=module)], capture_output=True, text=True,
                              env=plugin_process_env(), timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == repr([section])


def test_the_section_is_in_the_configs_of_the_ids_that_use_the_memory_only(toy):
    used = TrainConfig(algo="best-vdn")
    assert used.components == {"best": toy.BestSettings()} and used.to_dict()["best"] == {"bonus": toy.BONUS}
    assert TrainConfig.from_dict(used.to_dict()) == used
    assert "best" not in TrainConfig(algo="vdn").to_dict() and TrainConfig(algo="vdn").components == {}
    assert [f.key for f in component_fields("best-vdn")] == ["best.bonus"] and not component_fields("sem-vdn")
    assert dataclasses.replace(used, algo="vdn").components == {}  # the defaults of a part it no longer uses go
    with pytest.raises(ValueError, match=r"^best\.\* set for algo='qmix', which does not train with memory 'best'"):
        TrainConfig(algo="qmix", components={"best": {"bonus": 0.5}})
    with pytest.raises(ValueError, match=r"^best\.nope: not a setting of memory 'best'; expected one of best\.bonus"):
        TrainConfig(algo="best-qmix", components={"best": {"nope": 1}})
    with pytest.raises(KeyError, match="algo='qmix' does not use memory 'best'"):
        TrainConfig(algo="qmix").settings("best")
    assert TrainConfig().settings("learner") == TrainConfig().learner
    assert run_variant(TrainConfig(algo="best-qmix", components={"best": {"bonus": 0.05}})) == {"best.bonus": 0.05}
    assert run_variant(used) == {}


@pytest.mark.parametrize(("args", "needle"), [
    (["--algo", "best-qmix", "--set", "best.bonus=-1"],
     "bonus=-1: expected a finite number >= 0 (0 turns the bonus off); the default is 0.01"),
    (["--algo", "best-qmix", "--set", "best.nope=1"], "config key 'best.nope': expected <field>"),
    (["--algo", "qmix", "--set", "best.bonus=0.05"], "which does not train with memory 'best'"),
    (["--algo", "qmix", "--set", "learner.lr=0.001", "--lr", "0.002"],
     "--set learner.lr=0.001 and --lr both given: give the setting once"),
    (["--algo", "qmix", "--set", "bonus"], "--set 'bonus': expected KEY=VALUE"),
])
def test_a_bad_setting_is_one_usage_line(tmp_path, toy, args, needle):
    one_line_usage_error(invoke("train", *TINY, *args, "--out", str(tmp_path)), needle)
    assert not any(tmp_path.iterdir())


def test_set_with_resume_is_refused(tmp_path, toy):
    one_line_usage_error(invoke("train", "--resume", str(tmp_path), "--set", "learner.lr=0.001"),
                         "--set learner.lr=0.001 with --resume: a run continues with its own config.json")


def test_a_built_in_setting_by_its_key_is_the_flag_and_pinned(tmp_path, toy):
    result = invoke("train", *TINY, "--algo", "qmix", "--set", "learner.lr=0.001", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    config = load_config(tmp_path / "matrix_two_step_qmix_seed0")
    assert config.learner.lr == 0.001 and "learner.lr" in config.pinned


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sized:
    width: int = ranged(8, NON_NEGATIVE)


def test_settings_that_cannot_be_a_section_are_refused(fresh_registries):
    @dataclasses.dataclass(kw_only=True)
    class Mutable:
        width: int = 8

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class NoDefault:
        width: int

    with pytest.raises(TypeError, match="expected a frozen dataclass"):
        register_settings("memory", "mutable", Mutable)
    with pytest.raises(TypeError, match=r"settings field\(s\) \['width'\] have no default"):
        register_settings("memory", "nodefault", NoDefault)
    with pytest.raises(ValueError, match="which is a field of TrainConfig"):
        register_settings("mixer", "learner", Sized)
    register_settings("mixer", "sized", Sized)
    register_settings("mixer", "sized", Sized)  # again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        register_settings("mixer", "sized", Sized2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sized2:
    width: int = 4


def test_a_sweep_grids_a_component_setting_for_the_ids_that_use_it(tmp_path, toy):
    from semzoo.run.sweep import parse_grid, plan_trials

    trials = plan_trials(envs=["matrix:two_step"], algos=["qmix", "best-qmix"], seeds=[0], steps=64, out=tmp_path,
                         grid=parse_grid(["best.bonus=0.01,0.05"]))
    names = [trial.config.run_name for trial in trials]
    assert names == ["matrix_two_step_qmix_seed0", "matrix_two_step_best-qmix_seed0",
                     "matrix_two_step_best-qmix_best.bonus=0.05_seed0"]
    assert trials[2].config.settings("best").bonus == 0.05


# ----- the built-in memories' settings: components too, with a flag each -------------------------------------------


def test_a_built_in_memorys_flag_reaches_its_section_of_config_json(tmp_path):
    result = CliRunner().invoke(app, ["train", *TINY, "--algo", "emc-qmix", "--emc-loss-weight", "0.3",
                                      "--no-curiosity", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "matrix_two_step_emc-qmix_seed0" / "config.json").read_text())
    assert stored["emc"]["emc_loss_weight"] == 0.3 and stored["curiosity"]["curiosity"] is False
    assert {"emc.emc_loss_weight", "curiosity.curiosity"} <= set(stored["pinned"])
    assert "lagma" not in stored and "emu" not in stored  # the sections of memories the run does not train with
    config = load_config(tmp_path / "matrix_two_step_emc-qmix_seed0")
    assert config.settings("emc").emc_loss_weight == 0.3 and run_variant(config)["emc.emc_loss_weight"] == 0.3


@pytest.mark.parametrize(("args", "needle"), [
    (["--algo", "qmix", "--emc-loss-weight", "0.3"], "emc.* set for algo='qmix', which does not train with memory 'emc'"),
    (["--algo", "sem-qmix", "--set", "lagma.lagma_n_codes=8"], "lagma.* set for algo='sem-qmix'"),
    (["--algo", "lagma-qmix", "--set", "lagma.lagma_n_codes=8", "--lagma-n-codes", "9"],
     "--set lagma.lagma_n_codes=8 and --lagma-n-codes both given"),
])
def test_a_built_in_memorys_setting_for_another_algorithm_is_one_usage_line(tmp_path, args, needle):
    one_line_usage_error(CliRunner().invoke(app, ["train", *TINY, *args, "--out", str(tmp_path)]), needle)
    assert not any(tmp_path.iterdir())


def test_train_help_with_the_plugin_lists_its_memory_and_its_setting_with_range_and_default(toy):
    help_text = " ".join(invoke("train", "--help").output.split())
    assert "--algo best-<base> toy plugin: one value H" in help_text
    assert ("--set best.bonus=VALUE The exploration bonus before any episode is stored; it decays as 1 / sqrt(1 + "
            "episodes stored). Range: >= 0. [default: 0.01]") in help_text


def test_algos_gives_a_plugin_settings_range_beside_its_docstring(toy):
    listing = " ".join(invoke("algos").output.split())
    assert ("best.bonus=0.01 The exploration bonus before any episode is stored; it decays as 1 / sqrt(1 + episodes "
            "stored). Range: >= 0.") in listing


def test_memory_cost_gives_a_long_memory_name_a_column_of_its_own(monkeypatch):
    import semzoo.episodic.cost

    monkeypatch.setattr(semzoo.episodic.cost, "memory_costs", lambda *args, **kw: {"sem": 10**8, "maxmean": 16})
    out = CliRunner().invoke(app, ["memory-cost", "--agents", "3", "--actions", "9", "--state-size", "48"])
    assert out.exit_code == 0, out.output
    rows = [line.split() for line in out.output.splitlines() if line.startswith("  ") and "bytes)" in line]
    assert [row[:3] for row in rows] == [["sem", "0.1", "GB"], ["maxmean", "1.6e-8", "GB"]], out.output
