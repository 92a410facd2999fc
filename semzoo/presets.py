"""Presets: a baseline's domain configuration, as its authors ran it, by one name (``--preset authors-smac``).

A preset is a list of rules; each names the algorithm ids it applies to and the config fields it sets, with
the authors' file that says so. For an id, the fields of every matching rule are merged (a later rule wins), and
``TrainConfig`` fills those of its fields that are left at their defaults; a field given another value keeps
it. The run directory's config.json holds the preset's name and the fields it resolved to, so a resumed run
reads the same setup. ``semzoo algos`` prints every rule. ``TrainConfig`` reaches ``apply_preset`` through the
resolver this module installs in ``semzoo.config`` when imported (``semzoo/__init__`` imports it): the config is the
ground floor and imports nothing of semzoo, while the rules read the algorithm table.

    authors-smac, <memory->qplex   Qatten transformation, linear lambda heads, 2 updates/episode, target every
                                   100 episodes (200 updates), 100 episodes of burn-in  (wjh720/QPLEX)
    authors-smac, emc-<base>       2 updates/episode, target every 100 episodes, burn-in 32  (kikojay/EMC)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from semzoo.config import install_preset_resolver

if TYPE_CHECKING:
    from semzoo.algos import AlgorithmId
    from semzoo.config import TrainConfig

NO_PRESET = "none"


@dataclass(frozen=True)
class PresetRule:
    """The config fields (``section.field`` -> value) a preset sets for the algorithm ids ``matches`` accepts."""

    applies_to: str
    """The ids it applies to, in words (``semzoo algos`` prints it)."""
    matches: Callable[[AlgorithmId], bool]
    fields: Mapping[str, Any]
    source: str
    """The authors' files the values come from."""


_QPLEX_SMAC = PresetRule(
    applies_to="qplex and <memory>-qplex",
    matches=lambda algo: algo.mixer == "qplex",
    fields={"mixer.qplex_transformation": "qatten", "mixer.qplex_lambda_layers": 1, "mixer.qplex_attend_dim": 64,
            "mixer.qatten_heads": 4, "mixer.qatten_reg": 0.001, "learner.updates_per_episode": 2.0,
            "learner.target_update_episodes": 100, "learner.learn_start_episodes": 100},
    source="wjh720/QPLEX pymarl-master/src/config/algs/qplex_qatten_sc2.yaml and its README's SMAC command "
           "(num_circle=2; run.py counts the target period of 200 in updates, so 100 episodes)",
)
_EMC_SMAC = PresetRule(
    applies_to="emc-<base>",
    matches=lambda algo: algo.memory == "emc",
    fields={"learner.updates_per_episode": 2.0, "learner.target_update_episodes": 100,
            "learner.learn_start_episodes": None},
    source="kikojay/EMC pymarl/src/config/algs/EMC_sc2.yaml (num_circle: 2; burn_in_period: 32, the default)",
)

PRESETS: dict[str, tuple[PresetRule, ...]] = {"authors-smac": (_QPLEX_SMAC, _EMC_SMAC)}
"""Preset name -> its rules, in the order they are merged."""


def preset_fields(preset: str, algo_id: str) -> dict[str, Any]:
    """The fields ``preset`` sets for ``algo_id`` (``section.field`` -> value); empty for 'none' or no matching rule."""
    if preset == NO_PRESET:
        return {}
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: expected one of {', '.join([NO_PRESET, *PRESETS])}")
    from semzoo.algos import parse_algorithm

    algo = parse_algorithm(algo_id)
    fields: dict[str, Any] = {}
    for rule in PRESETS[preset]:
        if rule.matches(algo):
            fields.update(rule.fields)
    return fields


def apply_preset(config: TrainConfig) -> None:
    """Fill the fields ``config.preset`` sets for ``config.algo`` that are left at their defaults (in place, once,
    from ``TrainConfig.__post_init__``: the config is frozen)."""
    for key, value in preset_fields(config.preset, config.algo).items():
        section_name, _, name = key.partition(".")
        section = getattr(config, section_name)
        default = next(f.default for f in dataclasses.fields(section) if f.name == name)
        if getattr(section, name) == default and value != default:
            object.__setattr__(config, section_name, dataclasses.replace(section, **{name: value}))


install_preset_resolver(apply_preset)  # TrainConfig.__post_init__ calls it; config.py imports nothing of semzoo


def describe_presets() -> list[str]:
    """One line per rule of every preset, for ``semzoo algos``."""
    lines = []
    for name, rules in PRESETS.items():
        for rule in rules:
            sets = ", ".join(f"{key.partition('.')[2]}={'unset' if value is None else value}"
                             for key, value in rule.fields.items())
            lines.append(f"--preset {name}, {rule.applies_to}: {sets}  [{rule.source}]")
    return lines


__all__ = ["NO_PRESET", "PRESETS", "PresetRule", "apply_preset", "describe_presets", "preset_fields"]
