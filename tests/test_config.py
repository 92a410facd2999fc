"""The config tree: defaults are the main job, every field documented and range-checked, sections derived once."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from config_values import non_default_value

from semzoo.config import (
    BUILTIN_COMPONENTS,
    RANGE,
    SECTIONS,
    AgentConfig,
    ExplorationConfig,
    LearnerConfig,
    MemoryConfig,
    TrainConfig,
    component_fields,
    config_fields,
    family_team_reward,
    field_docs,
    registered_components,
)
from semzoo.envs.smac_rules import default_profile
from semzoo.episodic.settings import CuriositySettings, EMCSettings, EMUSettings, LAGMASettings
from semzoo.mixers.settings import MIXER_SETTINGS, QMIXSettings, QPLEXSettings, WQMIXSettings
from semzoo.presets import RUNTIMES
from semzoo.resolution import resolve

FIELDS = [*config_fields(), *(f for f in component_fields() if f.section in BUILTIN_COMPONENTS)]
"""The built-in fields and the built-in memories' own settings (``emc.emc_atol``, ...)."""
NUMERIC = [f for f in FIELDS if f.type in (int, float) or f.type == int | None]


def with_value(key: str, value) -> dict:
    """``TrainConfig().to_dict()`` with one field (``section.name`` or ``name``) set to ``value``; for a component's
    own setting, the config of an algorithm that uses it (``<memory>-qmix``, or the mixer's base)."""
    component = registered_components().get(key.rpartition(".")[0])
    user = (component.users or (component.name,))[0] if component is not None else None
    algo = TrainConfig().algo if user is None else user if component.kind == "mixer" else f"{user}-qmix"
    return merged(TrainConfig(algo=algo).to_dict(), key, value)


def merged(data: dict, key: str, value) -> dict:
    """``data`` (a config dict) with the field ``key`` set to ``value`` (in place, and returned)."""
    section, _, name = key.rpartition(".")
    (data.setdefault(section, {}) if section else data)[name] = value
    return data


def test_default_config_is_the_readmes_main_job():
    from pathlib import Path

    config = TrainConfig()
    assert (config.env, config.algo, config.steps) == ("smax:3m", "sem-qmix", 20_000)  # about 2 min on 2 idle cores
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    demo = next(line for line in readme.splitlines() if line.startswith("make demo"))
    assert f"SEM-QMIX on SMAX 3m for {config.steps // 1000}k env steps" in demo


def test_sections_are_the_dataclass_fields_of_train_config():
    expected = {"agent": AgentConfig, "memory": MemoryConfig, "learner": LearnerConfig,
                "exploration": ExplorationConfig}
    assert expected == SECTIONS


def test_the_built_in_memories_settings_are_components_of_the_ids_that_use_them():
    components = registered_components()
    assert {name: components[name].settings for name in BUILTIN_COMPONENTS} == {
        "curiosity": CuriositySettings, "emc": EMCSettings, "emu": EMUSettings, "lagma": LAGMASettings,
        "qmix": QMIXSettings, "qplex": QPLEXSettings, "wqmix": WQMIXSettings}
    assert sorted(TrainConfig(algo="emc-qmix").components) == ["curiosity", "emc", "qmix"]
    assert sorted(TrainConfig(algo="emu-vdn").components) == ["curiosity", "emu"]
    assert sorted(TrainConfig(algo="lagma-qplex").components) == ["lagma", "qplex"]
    assert sorted(TrainConfig(algo="sem-qmix").components) == ["qmix"] == sorted(TrainConfig(algo="qmix").components)
    assert "emc" not in TrainConfig(algo="qmix").to_dict() and "emc" in TrainConfig(algo="emc-qmix").to_dict()
    with pytest.raises(ValueError, match=r"^emc\.\* set for algo='qmix', which does not train with memory 'emc'"):
        TrainConfig(algo="qmix", components={"emc": {"emc_loss_weight": 0.5}})


@pytest.mark.parametrize(("algo", "sections"), [("vdn", []), ("qmix", ["qmix"]), ("sem-qplex", ["qplex"]),
                                                ("cw-qmix", ["qmix", "wqmix"]), ("sem-ow-qmix", ["qmix", "wqmix"])])
def test_each_mixer_owns_its_settings_in_the_configs_of_the_ids_on_it(algo, sections):
    assert sorted(TrainConfig(algo=algo).components) == sections


def test_a_mixers_settings_given_for_an_id_on_another_mixer_are_refused():
    with pytest.raises(ValueError, match=r"^qplex\.\* set for algo='qmix', which does not train with mixer 'qplex'"):
        TrainConfig(algo="qmix", components={"qplex": {"qplex_heads": 2}})


def test_a_stored_config_of_the_one_mixer_section_reads_as_the_same_run():
    """A config.json of the one-section layout holds every mixer's sizes in one section ``mixer``: each field reads
    into the section of the mixer that uses it, the other mixers' fields (which the run never read) are dropped,
    and pinned keys follow."""
    old = {"embed_dim": 16, "hypernet_dim": 64, "qplex_heads": 2, "qplex_attend_dim": 32,
           "qplex_transformation": "qatten", "qplex_lambda_layers": 2, "qatten_heads": 4, "qatten_reg": 0.001,
           "central_embed_dim": 32, "wqmix_alpha": 0.5}

    def stored(algo: str, pinned: list[str]) -> TrainConfig:
        data = {k: v for k, v in TrainConfig(algo=algo).to_dict().items() if k not in MIXER_SETTINGS}
        return TrainConfig.from_dict({**data, "mixer": old, "pinned": pinned})

    cw = stored("cw-qmix", ["mixer.wqmix_alpha", "mixer.qplex_heads", "n_envs"])
    assert cw.settings("qmix") == QMIXSettings(embed_dim=16) and "qplex" not in cw.components
    assert cw.settings("wqmix") == WQMIXSettings(central_embed_dim=32, wqmix_alpha=0.5)
    assert cw.pinned == ("wqmix.wqmix_alpha", "n_envs")
    qplex = stored("sem-qplex", ["mixer.embed_dim"])
    assert qplex.settings("qplex") == QPLEXSettings(qplex_embed_dim=16, qplex_heads=2, qplex_transformation="qatten")
    assert qplex.pinned == ("qplex.qplex_embed_dim",) and sorted(qplex.components) == ["qplex"]
    assert stored("vdn", []) == TrainConfig(algo="vdn")
    with pytest.raises(ValueError, match=r"^unknown config key 'mixer.width'"):
        TrainConfig.from_dict({"algo": "qmix", "mixer": {"width": 3}})


def test_a_stored_config_with_every_section_at_its_defaults_still_reads():
    """A config.json that holds each memory's section at its defaults, whatever the algorithm, reads as the same run."""
    data = TrainConfig(algo="qmix").to_dict()
    stored = {**data, **{name: dataclasses.asdict(registered_components()[name].settings())
                         for name in BUILTIN_COMPONENTS}}
    assert TrainConfig.from_dict(stored) == TrainConfig(algo="qmix")


def test_every_field_has_a_docstring_and_every_numeric_field_a_range():
    assert all(f.help for f in FIELDS), [f.key for f in FIELDS if not f.help]
    assert [f.key for f in NUMERIC if RANGE not in f.metadata] == []
    assert len(NUMERIC) >= 30  # the check above must see the numeric fields


def test_field_docs_are_the_strings_under_each_field_as_one_line():
    docs = field_docs(TrainConfig)
    assert docs["steps"] == "Environment steps to train for."
    assert "\n" not in docs["threads"] and docs["threads"].startswith("torch CPU threads for this process")


def test_an_unbounded_number_is_expected_as_a_finite_number_said_once():
    with pytest.raises(ValueError, match=r"^emu_desirable_return=nan: expected a finite number \(EMU's code"):
        TrainConfig.from_dict(with_value("emu.emu_desirable_return", math.nan))


@pytest.mark.parametrize("f", NUMERIC, ids=lambda f: f.key)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_refused_for_every_numeric_field(f, bad):
    with pytest.raises(ValueError, match=rf"^{f.name}={bad!r}: expected .*; (the default is|leave it unset)"):
        TrainConfig.from_dict(with_value(f.key, bad))


@pytest.mark.parametrize("f", NUMERIC, ids=lambda f: f.key)
def test_a_value_below_the_range_names_the_field_and_the_default(f):
    allowed = f.metadata[RANGE]
    below = allowed.low if allowed.low_open else allowed.low - 1
    with pytest.raises(ValueError, match=rf"^{f.name}=.*: expected .*{re.escape(str(allowed))}"):
        TrainConfig.from_dict(with_value(f.key, below))


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.key)
def test_every_field_round_trips_through_to_dict_with_a_non_default_value(f):
    value = non_default_value(f)
    assert value != f.default
    config = resolve(TrainConfig.from_dict(with_value(f.key, value))).config
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert resolve(TrainConfig.from_dict(config.to_dict())).config == config  # a stored config resolves to itself
    expected = with_value(f.key, value)
    if f.key == "runtime":  # a runtime sets its fields too
        for key, set_value in RUNTIMES[value].items():
            expected = merged(expected, key, set_value)
    family, _, map_name = expected["env"].partition(":")
    if family == "smax" and "profile" not in expected["env_args"]:  # a smax map resolves with its default profile
        expected["env_args"] = {**expected["env_args"], "profile": default_profile(map_name)}
    if expected["team_reward"] == "env":  # and with its family's team reward
        expected["team_reward"] = family_team_reward(expected["env"])
    assert config.to_dict() == expected


def test_integral_floats_become_ints_and_ints_floats_where_the_field_says():
    memory = MemoryConfig(capacity=1e6)  # JSON writes 1e6 as a float
    assert memory.capacity == 1_000_000 and isinstance(memory.capacity, int)
    assert isinstance(LearnerConfig(lr=1).lr, float)
    with pytest.raises(ValueError, match=r"capacity=1.5: expected an integer in \[1, 1000000000000\]"):
        MemoryConfig(capacity=1.5)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"learner": {"double_q": 1}}, "double_q=1: expected true or false"),
    ({"memory": {"miss_rule": "never"}}, "miss_rule='never': expected one of 'target', 'zero'"),
    ({"env": 3}, "env=3: expected type str"),
    ({"learner": {"lr": "fast"}}, "lr='fast': expected a finite number > 0"),
])
def test_a_value_of_the_wrong_type_is_refused(kwargs, needle):
    data = TrainConfig().to_dict()
    for key, value in kwargs.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ValueError, match=needle):
        TrainConfig.from_dict(data)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "mps"])
def test_device_names_a_config_accepts(device):
    assert TrainConfig(device=device).device == device


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:x", "CPU", ""])
def test_device_names_a_config_refuses(device):
    with pytest.raises(ValueError, match=r"expected 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"):
        TrainConfig(device=device)


def test_from_dict_refuses_an_unknown_key():
    with pytest.raises(ValueError, match="unknown config keys"):
        TrainConfig.from_dict({**TrainConfig().to_dict(), "lr": 1e-3})


def test_config_fields_lists_every_leaf_once():
    leaves = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in SECTIONS and f.name != "components"]
    leaves += [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    assert [f.key for f in config_fields()] == leaves
