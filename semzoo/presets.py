"""Runtimes and presets: how episodes are collected (``--runtime pymarl``, the default, or ``semzoo-0.2``), and a
baseline's domain configuration as its authors ran it (``--preset authors-smac``; ``--preset authors-sparse`` on
sparse rewards), and EPyMARL's setup of QMIX and VDN for Level-Based Foraging (``--preset epymarl-lbf``), each by
one name.

A runtime names the fields it sets (``RUNTIMES``). A preset is a list of rules; each names the algorithm ids it
applies to and the config fields it sets, with the authors' file that says so. For an id, the runtime's fields
and those of every matching rule are merged (a later rule wins), and resolving a run fills those of its config's
fields that are left at their defaults and not pinned; a field given another value, or given on the command line
(``TrainConfig.pinned``), keeps it. The authors of QPLEX and EMC ran PyMARL's episode runner with SMAC's terminal
time limits, which is the default runtime, so ``authors-smac`` runs in their runtime unless told otherwise. The
run directory's config.json holds the preset's name and the fields it resolved to, so a resumed run
reads the same setup. ``semzoo algos`` prints every rule. ``semzoo.resolution.resolve`` applies them (``apply_preset``)
when a run is built: the config stands below the algorithm table, which the rules read.

    authors-smac, <memory->qplex   Qatten transformation, linear lambda heads, 2 updates/episode, target every
                                   100 episodes (200 updates), 100 episodes of burn-in  (wjh720/QPLEX); refused
                                   on MMM2 and 3s5z_vs_3s6z, where the authors add Qatten options not built here
    authors-smac, emc-<base>       2 updates/episode, target every 100 episodes, burn-in 32  (kikojay/EMC)
    authors-sparse, lagma-<base>   LAGMA's sparse-reward SMAC configs: 256 codes, coefficients 2.0 / 1.0 / 1.0,
                                   VQ-VAE every 40 and codebook every 10 episodes (3m and 2s3z; 10 and 20 with
                                   epsilon over 500k on 2m_vs_1z); refused on 8m, whose file does not say
                                   (aailabkaist/LAGMA)
    epymarl-lbf, <memory->qmix/vdn EPyMARL's qmix.yaml / vdn.yaml with its default.yaml and gymma.yaml: no last
                                   action in the input, team reward the sum, 100 test episodes every 50k, limit 50
                                   (uoe-agents/epymarl); its reward standardisation and feed-forward agent are not
                                   built, and a run says so
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    per_map: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Map -> the fields the authors set otherwise on that map (they replace those of ``fields`` there)."""
    unbuilt: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Map -> why the authors' setup on that map is not semzoo's to run (options it does not build, a file that does
    not say): the preset refuses those maps in one line rather than run a setup that is not theirs."""
    unbuilt_source: str = ""
    """Where the authors' files say what ``unbuilt`` names."""
    reward: str = ""
    """The reward the authors' setup was made for, in words ('' for any): a run on another is told so."""
    reward_args: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Env family -> the env args that give ``reward`` there (``smax``: ``reward=deaths``), their defaults as the
    family's own (``reward_defaults``); a family not named has no such reward in semzoo."""
    departures: str = ""
    """What the source sets that semzoo does not build, in words ('' for nothing): a run is told so at its start."""


_QPLEX_SMAC = PresetRule(
    applies_to="qplex and <memory>-qplex",
    matches=lambda algo: algo.mixer == "qplex",
    fields={"qplex.qplex_transformation": "qatten", "qplex.qplex_lambda_layers": 1, "qplex.qplex_attend_dim": 64,
            "qplex.qatten_heads": 4, "qplex.qatten_reg": 0.001, "learner.updates_per_episode": 2.0,
            "learner.target_update_episodes": 100, "learner.learn_start_episodes": 100},
    source="wjh720/QPLEX pymarl-master/src/config/algs/qplex_qatten_sc2.yaml and its README's SMAC command "
           "(num_circle=2; run.py counts the target period of 200 in updates, so 100 episodes)",
    # qplex_qatten_sc2.yaml's comments: "weighted_head: ... for MMM2 and 3s5z_vs_3s6z, it is True",
    # "nonlinear: ... for MMM2, it is True" (attend_reg_coef, 0.001 there, is the preset's value everywhere)
    unbuilt={"MMM2": "the authors add weighted_head: True, nonlinear: True, which semzoo does not build",
             "3s5z_vs_3s6z": "the authors add weighted_head: True, which semzoo does not build"},
    unbuilt_source="the comments of wjh720/QPLEX qplex_qatten_sc2.yaml",
)
_EMC_SMAC = PresetRule(
    applies_to="emc-<base>",
    matches=lambda algo: algo.memory == "emc",
    fields={"learner.updates_per_episode": 2.0, "learner.target_update_episodes": 100,
            "learner.learn_start_episodes": None},
    source="kikojay/EMC pymarl/src/config/algs/EMC_sc2.yaml (num_circle: 2; burn_in_period: 32, the default)",
)

_LAGMA_SPARSE_FILES = "aailabkaist/LAGMA LAGMA_v0_release/src/config/algs/lagma_sc2_sparse_<map>.yaml"
_LAGMA_SPARSE = PresetRule(
    applies_to="lagma-<base>",
    matches=lambda algo: algo.memory == "lagma",
    fields={"lagma.lagma_n_codes": 256, "lagma.lagma_vq_coef": 2.0, "lagma.lagma_commit_coef": 1.0,
            "lagma.lagma_coverage_coef": 1.0, "lagma.lagma_vqvae_interval": 40, "lagma.lagma_codebook_interval": 10},
    source=f"{_LAGMA_SPARSE_FILES} for 3m and 2s3z (the same values), taken on maps without a file of their own",
    per_map={"2m_vs_1z": {"lagma.lagma_vqvae_interval": 10, "lagma.lagma_codebook_interval": 20,
                          "exploration.epsilon_anneal_steps": 500_000}},
    unbuilt={"8m": "the authors' file holds an unresolved merge conflict (VQ-VAE and codebook intervals 10 and 20, "
                   "or 20 and 10), so their setup there is not known"},
    unbuilt_source=_LAGMA_SPARSE_FILES.replace("<map>", "8m"),
    reward="LAGMA's sparse SMAC reward (aailabkaist/LAGMA config/envs/sc2_sparse.yaml)",
    reward_args={"smax": {"reward": "deaths"}},
)
_EPYMARL = "uoe-agents/epymarl src/config/"
_EPYMARL_COMMON = {
    # default.yaml: lr, batch_size, hidden_dim, gamma, optim_alpha, optim_eps, grad_norm_clip, reward_scalarisation
    "learner.lr": 0.0005, "learner.batch_size": 32, "agent.hidden_dim": 64, "learner.gamma": 0.99,
    "learner.rms_alpha": 0.99, "learner.rms_eps": 0.00001, "learner.grad_clip": 10.0, "team_reward": "sum",
    # algs/qmix.yaml and algs/vdn.yaml: buffer_size, target_update_interval_or_tau (counted in updates, one per
    # episode in the episode runner), epsilon_*, obs_agent_id, obs_last_action, double_q
    "learner.buffer_size": 5000, "learner.target_update_episodes": 200, "exploration.epsilon_start": 1.0,
    "exploration.epsilon_finish": 0.05, "exploration.epsilon_anneal_steps": 50_000, "agent.obs_agent_id": True,
    "agent.obs_last_action": False, "learner.double_q": True,
    # envs/gymma.yaml: test_nepisode, test_interval; README's LBF command: env_args.time_limit=50
    "test_episodes": 100, "test_interval": 50_000, "episode_limit": 50,
}
_EPYMARL_SOURCE = (f"{_EPYMARL}default.yaml, algs/qmix.yaml or algs/vdn.yaml, envs/gymma.yaml and the README's LBF "
                   "command (time_limit=50)")
_EPYMARL_DEPARTURES = ("standardise_rewards: True (rewards standardised by a running mean and variance) and use_rnn: "
                       "False (a feed-forward agent), which semzoo does not build: the run takes raw rewards and a "
                       "GRU agent")
_EPYMARL_QMIX = PresetRule(
    applies_to="qmix and <memory>-qmix",
    matches=lambda algo: algo.mixer == "qmix",
    fields={**_EPYMARL_COMMON, "qmix.embed_dim": 32, "qmix.hypernet_dim": 64},  # mixing_embed_dim, hypernet_embed
    source=_EPYMARL_SOURCE.replace(" or algs/vdn.yaml", ""),
    departures=_EPYMARL_DEPARTURES,
)
_EPYMARL_VDN = PresetRule(
    applies_to="vdn and <memory>-vdn",
    matches=lambda algo: algo.mixer == "vdn",
    fields=dict(_EPYMARL_COMMON),
    source=_EPYMARL_SOURCE.replace("algs/qmix.yaml or ", ""),
    departures=_EPYMARL_DEPARTURES,
)
REWARD_DEFAULTS: dict[str, dict[str, Any]] = {"smax": {"reward": "dense"}}
"""Env family -> the defaults of the env args a preset's ``reward_args`` name (SMAX's own dense reward)."""

PRESETS: dict[str, tuple[PresetRule, ...]] = {"authors-smac": (_QPLEX_SMAC, _EMC_SMAC),
                                              "authors-sparse": (_LAGMA_SPARSE,),
                                              "epymarl-lbf": (_EPYMARL_QMIX, _EPYMARL_VDN)}
"""Preset name -> its rules, in the order they are merged."""

DEFAULT_RUNTIME = "pymarl"
RUNTIMES: dict[str, dict[str, Any]] = {
    "pymarl": {"n_envs": 1, "sequential": True, "learner.timeout_as_terminal": True, "learner.target_count": "pymarl"},
    "semzoo-0.2": {"n_envs": 8, "sequential": False, "learner.timeout_as_terminal": False,
                "learner.target_count": "collected"},
}
"""Runtime name -> the fields it sets (``--runtime``). 'pymarl' is the paper's: PyMARL's episode runner
(oxwhirl/pymarl src/config/default.yaml: runner episode, batch_size_run 1; src/run.py: collect one episode, then
train; q_learner.py: the target syncs inside train once episode_num is target_update_interval past the last sync)
with SMAC's default continuing_episode False (a time limit is a terminal step), the defaults of these fields.
'semzoo-0.2' is the overlapped runtime: 8 envs at a time, collection overlapping learning, bootstrapping at time
limits, the target period counted in collected episodes; a stored run whose config names no runtime reads as this
one (``semzoo.runfiles.STORED_BEFORE``)."""
RUNTIME_SOURCE = ("oxwhirl/pymarl src/config/default.yaml (runner episode, batch_size_run 1), src/run.py, "
                  "src/learners/q_learner.py; oxwhirl/smac starcraft2.py (continuing_episode False)")


def _parsed(algo: str | AlgorithmId) -> AlgorithmId:
    """``algo`` as the algorithm table reads it (an id already parsed is returned as it is)."""
    from semzoo.algos import AlgorithmId, parse_algorithm

    return algo if isinstance(algo, AlgorithmId) else parse_algorithm(algo)


def preset_fields(preset: str, algo: str | AlgorithmId, env: str = "") -> dict[str, Any]:
    """The fields ``preset`` sets for the algorithm ``algo`` (an id, or parsed) on ``env`` (``section.field`` ->
    value); empty for 'none' or no matching rule. A rule's values for the env's map (``PresetRule.per_map``) replace
    its general ones."""
    if preset == NO_PRESET:
        return {}
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: expected one of {', '.join([NO_PRESET, *PRESETS])}")
    algo = _parsed(algo)
    map_name = _map_name(env)
    fields: dict[str, Any] = {}
    for rule in PRESETS[preset]:
        if rule.matches(algo):
            fields.update(rule.fields)
            fields.update(rule.per_map.get(map_name, {}))
    return fields


def _map_name(env: str) -> str:
    """The SMAC map of an env id ('smax:2s3z' -> '2s3z'); '' for other families."""
    family, _, map_name = env.partition(":")
    return map_name if family in ("smax", "smac") else ""


def check_preset_map(preset: str, algo: str | AlgorithmId, env: str) -> None:
    """ValueError (one line) when ``preset`` would give the algorithm ``algo`` on ``env`` a setup its authors did not
    run there: a map where they used options semzoo does not build (``PresetRule.unbuilt``)."""
    if preset == NO_PRESET or preset not in PRESETS:
        return
    map_name = _map_name(env)
    if not map_name:
        return
    algo = _parsed(algo)
    for rule in PRESETS[preset]:
        if map_name in rule.unbuilt and rule.matches(algo):
            raise ValueError(f"--preset {preset} with {algo.id} on {env}: on {map_name} {rule.unbuilt[map_name]} "
                             f"({rule.unbuilt_source}); drop --preset for semzoo's defaults there, or run the preset "
                             "on another map")


def unused_preset(config: TrainConfig, algo: AlgorithmId | None = None) -> str | None:
    """The line that says ``config.preset`` sets nothing for ``config.algo`` (parsed as ``algo`` where given; None
    when it sets something, or is 'none'): such a run takes the defaults, which a user who asked for the authors'
    setup should hear."""
    if config.preset == NO_PRESET or preset_fields(config.preset, algo or config.algo, config.env):
        return None
    applies = "; ".join(rule.applies_to for rule in PRESETS[config.preset])
    return (f"--preset {config.preset} sets nothing for {config.algo} (it sets {applies}): the run takes the "
            "defaults, PyMARL's setup")


def preset_reward_mismatch(config: TrainConfig, algo: AlgorithmId | None = None) -> str | None:
    """The line that says ``config.env`` does not pay the reward ``config.preset`` was made for (LAGMA's sparse setup
    on SMAX's dense reward), None when it does or the preset sets nothing for the algorithm: such a run is not the
    authors' setup, which a user who asked for it should hear at the start."""
    if config.preset == NO_PRESET or config.preset not in PRESETS:
        return None
    algo = _parsed(algo or config.algo)
    family = config.env.partition(":")[0]
    for rule in PRESETS[config.preset]:
        if not rule.reward or not rule.matches(algo):
            continue
        wanted = rule.reward_args.get(family)
        if wanted is None:
            ways = "; ".join(f"{fam}: --env-arg {' --env-arg '.join(f'{k}={v}' for k, v in args.items())}"
                             for fam, args in rule.reward_args.items())
            return (f"--preset {config.preset} is made for {rule.reward}; {config.env} pays its own reward, so the run "
                    f"is not the authors' setup (semzoo gives that reward on {ways})")
        given = {key: config.env_args.get(key, REWARD_DEFAULTS.get(family, {}).get(key)) for key in wanted}
        if given != dict(wanted):
            have = ", ".join(f"{key}={value}" for key, value in given.items())
            fix = " ".join(f"--env-arg {key}={value}" for key, value in wanted.items())
            return (f"--preset {config.preset} is made for {rule.reward}; {config.env} runs on {have}: add {fix} for "
                    "the reward it was made for")
    return None


def preset_departures(config: TrainConfig, algo: AlgorithmId | None = None) -> str | None:
    """The line that names what ``config.preset``'s source sets for ``config.algo`` and semzoo does not build
    (EPyMARL's reward standardisation), None where nothing: a user who asked for that setup should hear it."""
    if config.preset == NO_PRESET or config.preset not in PRESETS:
        return None
    algo = _parsed(algo or config.algo)
    for rule in PRESETS[config.preset]:
        if rule.departures and rule.matches(algo):
            return f"--preset {config.preset} for {config.algo}: its source also sets {rule.departures}"
    return None


def runtime_fields(runtime: str) -> dict[str, Any]:
    """The fields ``runtime`` sets (``key`` -> value); ValueError for an unknown name."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}: expected one of {', '.join(RUNTIMES)}")
    return dict(RUNTIMES[runtime])


def resolved_fields(config: TrainConfig, algo: AlgorithmId | None = None) -> dict[str, Any]:
    """What the runtime and then the preset set for ``config`` (the preset wins where both name a field); ``algo`` is
    ``config.algo`` parsed, where the caller has it."""
    return {**runtime_fields(config.runtime), **preset_fields(config.preset, algo or config.algo, config.env)}


def apply_preset(config: TrainConfig, algo: AlgorithmId | None = None) -> TrainConfig:
    """``config`` with the fields that ``config.runtime`` and ``config.preset`` set (for ``config.algo``, parsed as
    ``algo`` where given) filled in, where they are left at their defaults and not in ``config.pinned``; a field given
    another value keeps it. Applying it again changes nothing, so a stored config resolves to itself. A map the preset
    refuses for the algorithm (``check_preset_map``) is a ValueError."""
    algo = _parsed(algo or config.algo)
    check_preset_map(config.preset, algo, config.env)
    changes: dict[str, Any] = {}
    for key, value in resolved_fields(config, algo).items():
        if key in config.pinned:
            continue
        section_name, _, name = key.rpartition(".")
        owner = config.settings(section_name) if section_name else config
        default = next(f.default for f in dataclasses.fields(owner) if f.name == name)
        if getattr(owner, name) == default and value != default:
            changes[key] = value
    if not changes:
        return config
    from semzoo.config import TrainConfig, apply_overrides

    return TrainConfig.from_dict(apply_overrides(config.to_dict(), changes))


def describe_presets() -> list[str]:
    """One line per runtime, then one per rule of every preset, for ``semzoo algos``."""
    lines = []
    for name, fields in RUNTIMES.items():
        sets = _fields_text(fields)
        if name == DEFAULT_RUNTIME:
            lines.append(f"--runtime {name} (the default, the paper's): {sets}  [{RUNTIME_SOURCE}]")
        else:
            lines.append(f"--runtime {name} (the overlapped runtime): {sets}")
    for name, rules in PRESETS.items():
        for rule in rules:
            on_maps = "".join(f"; on {map_name}: {_fields_text(fields)}" for map_name, fields in rule.per_map.items())
            refused = "".join(f"; refused on {map_name} ({why})" for map_name, why in rule.unbuilt.items())
            departs = f"; not built: {rule.departures.partition(', which')[0]}" if rule.departures else ""
            lines.append(f"--preset {name}, {rule.applies_to}: {_fields_text(rule.fields)}{on_maps}{refused}"
                         f"{departs}  [{rule.source}]")
    return lines


def _fields_text(fields: Mapping[str, Any]) -> str:
    """'n_envs=1, timeout_as_terminal=True': a runtime's or a rule's fields by name, for ``describe_presets``."""
    return ", ".join(f"{key.rpartition('.')[2]}={'unset' if value is None else value}" for key, value in fields.items())


__all__ = ["DEFAULT_RUNTIME", "NO_PRESET", "PRESETS", "RUNTIMES", "PresetRule", "apply_preset", "check_preset_map",
           "describe_presets", "preset_departures", "preset_fields", "preset_reward_mismatch", "resolved_fields", "runtime_fields",
           "unused_preset"]
