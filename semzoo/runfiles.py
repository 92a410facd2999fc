"""A run directory's files, and their readers shared by the two halves of semzoo: training writes a run
(``semzoo.run.rundir``: the lock, the metrics writer, checkpoints, the best agent), the analysis of finished runs
(``semzoo.analysis``) reads it. Imports no torch.

    <run_dir>/config.json     the resolved TrainConfig (``TrainConfig.to_dict``)
    <run_dir>/metrics.csv     long format: env_steps, episodes, updates, wall_time, name, value
    <run_dir>/checkpoints/    the last ``keep_checkpoints`` checkpoints (``semzoo.run.checkpoint``)
    <run_dir>/best.ckpt       the agent of the best test evaluation so far: agent parameters, its env step,
                              score and metric (a checkpoint file, no replay buffer; ``semzoo.run.rundir.write_best``)
    <run_dir>/absolute.json   the best agent re-evaluated on 10x the test episodes (``absolute_metric``)
    <run_dir>/tensorboard/    TensorBoard events (when tensorboard is installed)
    <run_dir>/final.json      written once the run has finished
    <run_dir>/provenance.json the code and machine of each session, the start then each resume: semzoo's version and
                              git commit (dirty or not), package versions, device, CPU (``semzoo.run.provenance``)
    <run_dir>/.lock           held (flock) by the one process writing the run

A report names each run's method by its algorithm id and the settings that set it apart (``run_labels``).
"""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semzoo.config import TrainConfig, builtin_fields, component_fields, config_fields, is_smax, registered_components
from semzoo.episodic.memory import NO_MEMORY, memory_of
from semzoo.presets import DEFAULT_RUNTIME, preset_fields, resolved_fields

METRIC_FIELDS = ("env_steps", "episodes", "updates", "wall_time", "name", "value")
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
FINAL_FILE = "final.json"
BEST_FILE = "best.ckpt"
ABSOLUTE_FILE = "absolute.json"
LOCK_FILE = ".lock"
PROVENANCE_FILE = "provenance.json"
PLUGINS_FILE = "plugins.json"
"""A run's plugins: ``{"components": {"memory": "maxmean_memory", ...}}``, the plugin (as given to --plugin) each of
its parts came from; written only for a run that uses a plugin's part. Read as data: reading a run imports nothing."""
UNKNOWN_COMMIT = "unknown"
"""The commit a provenance record names where git was absent or semzoo was not imported from a git checkout."""
TENSORBOARD_DIR = "tensorboard"
TIMING_METRICS = frozenset({"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s", "checkpoint_time_s",
                            "checkpoint_mb"})
"""Metrics that measure the machine, not the learning: they differ between identical runs."""
STORED_BEFORE: dict[str, Any] = {"sequential": True, "runtime": "semzoo-0.2", "team_reward": "mean",
                                 "learner": {"target_count": "collected"}}
"""The value a stored run was trained with for each field its config.json or checkpoint may lack: a run stored
without the key collected and learned one after the other, in the overlapped runtime ('semzoo-0.2'), with the
target period counted in collected episodes, with the agents' mean reward as the team reward, so reading it with the
defaults would change it. A section's keys sit
under its name."""
SMAX_OWN_PROFILE = "smax"
"""The profile of a ``smax:<map>`` run whose config.json names none: it trained on SMAX's own rules (a run names the
profile it trained on since SMAC's became the default), and labels leave this profile out (``env_arg_texts``). It is
``smac_rules.SMAX`` written out: the run-directory readers import nothing of the envs (a test holds them equal)."""
RUNTIME_KEY = "runtime"
"""The config key of a run's runtime; ``run_variant`` shows it (when not the default) in place of its fields."""
PRESET_KEY = "preset"
"""The config key of a run's preset; ``run_variant`` shows it in place of the fields the preset set."""


def read_metrics(run_dir: str | Path, bad_rows: list[tuple[int, str]] | None = None) -> list[dict[str, Any]]:
    """The rows of a run's metrics.csv with numbers parsed.

    A half-written last row (the file does not end with a newline: a run killed while writing it, a copy cut short) is
    left out, as is any other row that does not parse; where ``bad_rows`` is given, each of those others is appended
    to it as (its line number in the file, its text), so a reader can name them.
    """
    text = (Path(run_dir) / METRICS_FILE).read_text()
    lines = text.splitlines()
    if text and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the cut row: ``metrics_cut_line`` names it
    rows = []
    reader = csv.DictReader(lines)
    for r in reader:
        try:
            rows.append({"env_steps": int(r["env_steps"]), "episodes": int(r["episodes"]),
                         "updates": int(r["updates"]), "wall_time": float(r["wall_time"]), "name": r["name"],
                         "value": float(r["value"])})
        except (TypeError, ValueError):
            if bad_rows is not None:
                bad_rows.append((reader.line_num, lines[reader.line_num - 1]))
    return rows


def metrics_cut_line(run_dir: str | Path) -> int | None:
    """The line number of the row a run's metrics.csv ends inside (it does not end with a newline), else None."""
    text = (Path(run_dir) / METRICS_FILE).read_text()
    if not text or text.endswith(("\n", "\r")):
        return None
    return len(text.splitlines())


def read_provenance(run_dir: str | Path) -> dict[str, Any] | None:
    """A run's ``provenance.json`` (``{"sessions": [record, ...]}``, oldest first), or None where it has none (a run
    made before semzoo kept one) or it cannot be read."""
    try:
        data = json.loads((Path(run_dir) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("sessions"), list) else None


def run_commits(run_dir: str | Path) -> list[str]:
    """The semzoo commits a run's sessions ran, in order without repeats, ``-dirty`` after a commit whose checkout
    had uncommitted changes (``UNKNOWN_COMMIT`` where a session could not tell); [] without a provenance record."""
    data = read_provenance(run_dir)
    commits: list[str] = []
    for session in (data or {}).get("sessions", []):
        code = session.get("semzoo", {}) if isinstance(session, dict) else {}
        commit = str(code.get("commit", UNKNOWN_COMMIT))
        if commit != UNKNOWN_COMMIT and code.get("dirty"):
            commit += "-dirty"
        if commit not in commits:
            commits.append(commit)
    return commits


def run_plugins(run_dir: str | Path) -> dict[str, str]:
    """The plugins a run's parts came from, part -> plugin (``{"memory": "maxmean_memory"}``), from its
    ``PLUGINS_FILE``; {} for a run without one (no plugin) or an unreadable one. Imports nothing."""
    try:
        data = json.loads((Path(run_dir) / PLUGINS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    parts = data.get("components") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in parts.items()} if isinstance(parts, dict) else {}


def plugin_flags(plugins: Sequence[str]) -> str:
    """'--plugin a --plugin b ' for the plugins (each once, in order); '' for none."""
    return "".join(f"--plugin {plugin} " for plugin in dict.fromkeys(plugins))


def missing_plugins(run_dir: str | Path) -> str | None:
    """"this run's memory comes from module maxmean_memory: add --plugin maxmean_memory" where a plugin a run's part
    came from is not imported in this process, else None. Imports nothing: the user names the plugin to import."""
    from semzoo.plugins import is_plugin_file, load_plugins, plugin_loaded

    load_plugins()  # the plugins the user named (SEMZOO_PLUGINS, entry points), not yet imported: never the run's
    missing = {part: plugin for part, plugin in run_plugins(run_dir).items() if not plugin_loaded(plugin)}
    if not missing:
        return None
    sources = [f"{part} comes from {'file' if is_plugin_file(plugin) else 'module'} {plugin}"
               for part, plugin in missing.items()]
    parts = "this run's " + " and its ".join(sources)
    return (f"{parts}: add {plugin_flags(list(missing.values())).strip()} (from Python: import "
            f"it first); {run_dir} names it in {PLUGINS_FILE}")


def read_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config stored in a run directory as written, its algorithm id not judged (that needs the
    algorithm table; ``semzoo.run.rundir.load_run_config`` judges it); ValueError naming the problem otherwise."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run directory {str(run_dir)!r} does not exist: expected a folder made by `semzoo train`")
    path = run_dir / CONFIG_FILE
    if not path.exists():
        raise ValueError(f"{run_dir} has no {CONFIG_FILE}: expected a run directory made by `semzoo train`")
    missing = missing_plugins(run_dir)
    if missing is not None:  # its config names the plugin's settings and ids: say which plugin, not which keys
        raise ValueError(missing)
    try:
        return TrainConfig.from_dict(stored_config_dict(json.loads(path.read_text())))
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise ValueError(f"{path} is not a valid semzoo config: {str(err).splitlines()[0]}") from None


def stored_config_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A config dict read from a run directory, with the fields it predates set as it was trained (``STORED_BEFORE``);
    one from before ``pinned`` pins every field, since it holds the values its run resolved to, and a ``smax:<map>``
    run that names no profile trained on SMAX's own rules (``SMAX_OWN_PROFILE``)."""
    if not isinstance(data, dict):
        return data
    out = {**STORED_BEFORE, **data}
    for key, before in STORED_BEFORE.items():
        if isinstance(before, dict) and isinstance(data.get(key), dict):
            out[key] = {**before, **data[key]}
    if "pinned" not in data:  # stored resolved before pinning: the runtime must not fill its fields again
        out["pinned"] = sorted(f.key for f in builtin_fields())
    env_args = out.get("env_args")
    if is_smax(str(out.get("env", TrainConfig.env))) and isinstance(env_args, dict) and "profile" not in env_args:
        out["env_args"] = {**env_args, "profile": SMAX_OWN_PROFILE}  # stored before runs named their profile
    return out


@functools.cache
def _setting_names() -> dict[str, str]:
    """Config key -> the name a label shows: the field's own name, or its key where two sections share it."""
    fields = [f for f in builtin_fields() if f.section is not None]
    counts: dict[str, int] = {}
    for f in fields:
        counts[f.name] = counts.get(f.name, 0) + 1
    return {f.key: f.name if counts[f.name] == 1 else f.key for f in fields}


def setting_name(key: str) -> str:
    """The name labels and run names give a config key (``memory.lam`` -> ``lam``)."""
    return _setting_names().get(key, key)


def setting_text(key: str, value: Any) -> str:
    """``name=value`` of one config setting as labels and run names show it (``lam=0.3``, ``miss_rule=zero``)."""
    shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else json.dumps(value)
    return f"{setting_name(key)}={shown.strip(chr(34))}"


def env_label(config: TrainConfig) -> str:
    """What a report calls the run's env: its id, then its env arguments (``smax:2s3z fixed_starts=true``), so
    runs on one map with other env arguments (SMAX's fixed starts) are never pooled."""
    return " ".join([config.env, *env_arg_texts(config)])


def env_arg_texts(config: TrainConfig) -> list[str]:
    """The run's env arguments as ``key=value`` words, sorted by key (``['attack=unit_range', 'profile=smac']``);
    SMAX's own profile is left out, so a run on SMAX's rules reads the same whether its config.json names it or not."""
    return [f"{key}={json.dumps(value).strip(chr(34))}" for key, value in sorted(config.env_args.items())
            if not (key == "profile" and value == SMAX_OWN_PROFILE and is_smax(config.env))]


def run_variant(config: TrainConfig) -> dict[str, Any]:
    """The run's section settings (agent, mixer, memory, learner, exploration, and a component's own, such as a
    plugin memory's ``best.bonus``) that differ from the defaults, key -> value in the config's order; memory
    settings only for an algorithm with episodic memory.

    A runtime other than the default stands for the fields it set in the same way (``qmix runtime=semzoo-0.2``).
    A preset stands for the fields it set (``semzoo.presets``): a run with ``--preset authors-smac`` that the
    preset changes gets ``preset`` first, then only its settings off the preset's values, so a report calls it
    ``qplex preset=authors-smac``, not by the eight fields the preset set. A preset that sets nothing for the
    run's algorithm names nothing.
    """
    has_memory = memory_of(config.algo) != NO_MEMORY
    data = config.to_dict()
    out: dict[str, Any] = {RUNTIME_KEY: config.runtime} if config.runtime != DEFAULT_RUNTIME else {}
    if preset_fields(config.preset, config.algo, config.env):
        out[PRESET_KEY] = config.preset
    unset = _unset_values(config)
    for f in [*config_fields(), *component_fields(config.algo)]:
        if f.section is None or (f.section == "memory" and not has_memory):
            continue
        value = data[f.section][f.name]
        if value != unset.get(f.key, f.default):
            out[f.key] = value
    return out


def _unset_values(config: TrainConfig) -> dict[str, Any]:
    """Key -> the value a setting holds in ``config`` when it is left out of its variant: what the config's runtime
    or preset set (``resolved_fields``), else the field's default."""
    return {**{f.key: f.default for f in [*config_fields(), *component_fields()]}, **resolved_fields(config)}


def varying_settings(configs: Sequence[TrainConfig]) -> list[str]:
    """The keys of the section settings (``run_variant``) whose value is not the same in every config, a setting a
    config leaves out counting as what its runtime or preset set, else as the default, in the config's order; a
    memory setting among the configs with episodic memory only, a component's own among the configs that use it."""
    return _varying(configs, [run_variant(c) for c in configs])


def _varying(configs: Sequence[TrainConfig], variants: Sequence[dict[str, Any]]) -> list[str]:
    # a run of the overlapped runtime ('semzoo-0.2') with --timeout-as-terminal differs from its runtime's runs
    # there, not from the paper's-runtime default it happens to equal
    unset = [_unset_values(c) for c in configs]
    keys = dict.fromkeys(key for variant in variants for key in variant)
    return [key for key in keys
            if len({json.dumps(v.get(key, left_out[key]), sort_keys=True)
                    for v, left_out, config in zip(variants, unset, configs, strict=True)
                    if _has_setting(config, key)}) > 1]


def _has_setting(config: TrainConfig, key: str) -> bool:
    """Whether the setting ``key`` acts in a run of ``config``: a memory setting in a run with episodic memory, a
    component's own setting (``lagma.*``) in a run of an algorithm that uses the component, any other in every run."""
    section = key.partition(".")[0] if "." in key else ""
    if section == "memory":
        return memory_of(config.algo) != NO_MEMORY
    component = registered_components().get(section)
    return component is None or component.used_by(config.algo)


def run_labels(configs: Sequence[TrainConfig]) -> list[str]:
    """What a report calls each run's method: its algorithm id, then its settings off the defaults that are not
    the same in every run (``varying_settings``, shown by ``setting_text``): ``sem-qmix lam=0.3`` in a lambda
    sweep, where lambda 0.1's runs stay ``sem-qmix``. A setting all the runs share (a study's smaller batch) names
    nothing apart, so it is left out; memory settings count among the runs with episodic memory only. Two
    settings are never pooled.
    """
    variants = [run_variant(c) for c in configs]
    varying = set(_varying(configs, variants))
    return [" ".join([c.algo, *(setting_text(k, v) for k, v in variant.items() if k in varying)])
            for c, variant in zip(configs, variants, strict=True)]
