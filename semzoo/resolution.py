"""The run resolved once: a config with its env's default profile, its runtime and preset applied, and its algorithm
id parsed.

A ``TrainConfig`` holds what was asked for (``pinned`` names the fields given explicitly); ``resolve`` turns it into
what runs, in one step that every entry point takes (``train``, ``Trainer``, ``train_seeds``, a sweep's trials, the
CLI before it prints the memory plan):

    config  --resolve-->  ResolvedRun(config with the runtime's and the preset's fields filled in, algo parsed,
                                      ``smax:<map>``'s env arguments with their profile: SMAC's on a SMAC map,
                          ``team_reward`` the env family's: sum on ``lbf:``, else mean)
                          --algos.build-->  agent, mixer, memory, learner

Every part of a run is then built from the ``ResolvedRun``: the algorithm table's row and the memory's name come from
``algo``, never from parsing ``config.algo`` again. config.json stores ``ResolvedRun.config``; resolving a stored
config gives it back unchanged, so a resumed run reads the same setup.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from semzoo.algos import AlgorithmId, parse_algorithm
from semzoo.config import TrainConfig, family_team_reward, is_smax
from semzoo.presets import apply_preset


@dataclass(frozen=True)
class ResolvedRun:
    """A config ready to build: ``config`` with its runtime and preset applied, ``algo`` its parsed algorithm id."""

    config: TrainConfig
    algo: AlgorithmId

    def with_config(self, config: TrainConfig) -> ResolvedRun:
        """The same run with ``config`` (fitted to an env, or another buffer size for a memory plan); its algorithm
        id must stay ``self.algo``'s."""
        if config.algo != self.algo.id:
            raise ValueError(f"with_config: algo {config.algo!r} is not this run's {self.algo.id!r}; resolve it anew")
        return dataclasses.replace(self, config=config)

    def replace(self, **changes: Any) -> ResolvedRun:
        """The same run with ``changes`` to its config's fields (``dataclasses.replace``), not resolved again."""
        return self.with_config(dataclasses.replace(self.config, **changes))


def resolve(config: TrainConfig | ResolvedRun) -> ResolvedRun:
    """``config`` resolved: its algorithm id judged by the algorithm table (ValueError naming the valid ids), the
    fields its runtime and preset set filled where left at their defaults and not pinned (a map the preset refuses
    is a ValueError). A ``ResolvedRun`` is returned as it is."""
    if isinstance(config, ResolvedRun):
        return config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"resolve got {config!r}: expected a semzoo.TrainConfig")
    algo = parse_algorithm(config.algo)
    # the preset before the family's team reward: a preset that sets one (epymarl-lbf: sum) finds the default 'env'
    return ResolvedRun(with_team_reward(apply_preset(with_env_profile(config), algo)), algo)


def with_env_profile(config: TrainConfig) -> TrainConfig:
    """``config`` with the profile of a ``smax:<map>`` env named in its env arguments: the one given, else
    ``semzoo.envs.smac_rules.default_profile`` (``smac`` on a map StarCraft II SMAC has), so config.json always
    says which rules the run trained on. Other envs are returned as they are."""
    if not is_smax(config.env) or "profile" in config.env_args:
        return config
    from semzoo.envs.smac_rules import default_profile

    map_name = config.env.partition(":")[2]
    return dataclasses.replace(config, env_args={**config.env_args, "profile": default_profile(map_name)})


def with_team_reward(config: TrainConfig) -> TrainConfig:
    """``config`` with ``team_reward='env'`` replaced by its env family's ('sum' on ``lbf:``, else 'mean'), so
    config.json says which team reward the run trained on. 'mean' and 'sum' are returned as they are."""
    if config.team_reward != "env":
        return config
    return dataclasses.replace(config, team_reward=family_team_reward(config.env))


__all__ = ["ResolvedRun", "resolve", "with_env_profile", "with_team_reward"]
