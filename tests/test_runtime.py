"""The paper's runtime (``--runtime pymarl``, the default): PyMARL's episode runner and SMAC's terminal time limit,
and semzoo's former runtime (``--runtime semzoo-0.2``) by name; typed flags keep their values against both."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import error_lines, resolved_config
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.presets import RUNTIMES
from semzoo.run.trainer import Trainer
from semzoo.runfiles import read_run_config, run_labels

runner = CliRunner()


def pymarl_target_syncs(episodes: int, *, batch_size: int, period: int) -> tuple[list[int], int]:
    """PyMARL's loop (oxwhirl/pymarl src/run.py with q_learner.train), counters only, written out here: the 1-based
    count of collected episodes at each target sync, and the number of updates."""
    episode, last_sync, in_buffer, updates, syncs = 0, 0, 0, 0, []
    while episode < episodes:  # PyMARL's `while runner.t_env <= t_max`, here a count of episodes
        in_buffer += 1  # runner.run(); buffer.insert_episode_batch
        if in_buffer >= batch_size:  # buffer.can_sample(batch_size)
            updates += 1  # learner.train(sample, t_env, episode)
            if (episode - last_sync) / period >= 1.0:
                syncs.append(episode + 1)
                last_sync = episode
        episode += 1  # episode += batch_size_run
    return syncs, updates


def traced_syncs(config: TrainConfig) -> tuple[list[int], Trainer]:
    trainer = Trainer(config)
    syncs: list[int] = []
    update_target = trainer.learner.update_target

    def traced() -> None:
        syncs.append(trainer.counters.episodes)
        update_target()

    trainer.learner.update_target = traced  # type: ignore[method-assign]
    trainer.run()
    return syncs, trainer


def small(**changes) -> TrainConfig:
    learner = LearnerConfig(batch_size=4, buffer_size=64, target_update_episodes=10)
    return TrainConfig(env="matrix:climbing", algo="qmix", steps=57, test_interval=10_000, save_interval=0,
                       device="cpu", learner=learner, **changes)


def test_the_default_runtime_counts_learning_start_and_target_syncs_as_pymarl_does():
    syncs, trainer = traced_syncs(small())
    expected_syncs, expected_updates = pymarl_target_syncs(57, batch_size=4, period=10)
    assert expected_syncs == [11, 21, 31, 41, 51]  # the sync after episode index 10, 20, ...: one episode past 10
    assert (syncs, trainer.counters.updates, trainer.counters.episodes) == (expected_syncs, expected_updates, 57)


def test_the_former_runtime_counts_collected_episodes():
    syncs, trainer = traced_syncs(small(runtime="semzoo-0.2", sequential=True, pinned=("sequential",)))
    assert trainer.config.n_envs == 8 and trainer.config.learner.target_count == "collected"
    # batches of 8 episodes: the first iteration whose episodes reach the period past the last sync
    assert syncs == [16, 32, 48, 64]


def stored_terminals(config: TrainConfig) -> torch.Tensor:
    trainer = Trainer(config)
    try:
        trainer.collect()
        stored = trainer.buffer.stored(0, len(trainer.buffer))
        last = stored.length - 1
        return stored.terminated[torch.arange(stored.batch_size), last]
    finally:
        trainer.close()


def test_a_time_limit_is_stored_as_terminal_in_the_papers_runtime_and_bootstrapped_in_the_former():
    # the two-step game ends at its second step; a limit of one step truncates every episode there
    assert stored_terminals(TrainConfig(env="matrix:two_step", algo="qmix", episode_limit=1, device="cpu")).all()
    former = resolved_config(env="matrix:two_step", algo="qmix", episode_limit=1, device="cpu", runtime="semzoo-0.2")
    assert not stored_terminals(former).any()
    real_ends = resolved_config(env="matrix:two_step", algo="qmix", device="cpu", runtime="semzoo-0.2")
    assert stored_terminals(real_ends).all()  # a real end is terminal in either runtime


def test_a_runtime_sets_its_fields_and_a_pinned_field_keeps_its_value_even_at_the_default():
    former = resolved_config(runtime="semzoo-0.2")
    assert (former.n_envs, former.sequential, former.learner.timeout_as_terminal,
            former.learner.target_count) == (8, False, False, "collected")
    assert resolved_config(runtime="semzoo-0.2", n_envs=1, pinned=("n_envs",)).n_envs == 1
    assert resolved_config(runtime="semzoo-0.2", n_envs=1).n_envs == 8  # not pinned: the runtime fills a default
    assert resolved_config(runtime="pymarl").to_dict() == TrainConfig().to_dict() | {"runtime": "pymarl",
                                                                                     "env_args": {"profile": "smac"},
                                                                                     "team_reward": "mean"}
    for name, fields in RUNTIMES.items():  # each runtime names the same parts
        assert set(fields) == set(RUNTIMES["pymarl"]), name


def test_a_pinned_key_that_is_no_config_key_is_an_error():
    with pytest.raises(ValueError, match="not config keys"):
        TrainConfig(pinned=("learner.nope",))


def train(tmp_path, *args: str):
    return runner.invoke(app, ["train", "--steps", "40", "--out", str(tmp_path), "--run-name", "r", "--save-interval",
                               "0", "--no-tensorboard", *args])


def test_a_flag_typed_keeps_its_value_against_the_preset_even_when_it_is_the_default(tmp_path):
    result = train(tmp_path, "--env", "smax:3m", "--algo", "qplex", "--preset", "authors-smac",
                   "--qplex-transformation", "general", "--steps", "60")
    assert result.exit_code == 0, result.output
    config = read_run_config(tmp_path / "r")
    assert config.settings("qplex").qplex_transformation == "general"  # typed, though it is the default
    assert config.learner.updates_per_episode == 2.0  # the rest of the preset still applies
    assert "qplex.qplex_transformation" in config.pinned


def test_a_flag_typed_keeps_its_value_against_the_runtime(tmp_path):
    result = train(tmp_path, "--env", "matrix:climbing", "--algo", "vdn", "--runtime", "semzoo-0.2", "--n-envs", "1",
                   "--timeout-as-terminal")
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (stored["runtime"], stored["n_envs"], stored["sequential"]) == ("semzoo-0.2", 1, False)
    assert stored["learner"]["timeout_as_terminal"] is True and stored["learner"]["target_count"] == "collected"


def test_a_preset_that_sets_nothing_for_the_algorithm_says_so_when_the_run_starts(tmp_path):
    result = train(tmp_path, "--env", "matrix:climbing", "--algo", "vdn", "--preset", "authors-smac")
    assert result.exit_code == 0, result.output
    lines = [line for line in error_lines(result.output) if "sets nothing" in line]
    assert len(lines) == 1 and "vdn" in lines[0] and "qplex" in lines[0], result.output
    assert result.output.index("sets nothing") < result.output.index("run directory:")


def test_an_unknown_runtime_is_a_usage_error(tmp_path):
    result = train(tmp_path, "--runtime", "pymarl2")
    assert result.exit_code == 2
    assert "pymarl2" in result.output and "semzoo-0.2" in result.output


def test_semzoo_algos_and_the_train_help_name_the_papers_runtime_and_what_it_sets():
    result = runner.invoke(app, ["algos"], terminal_width=80)
    assert result.exit_code == 0, result.output
    entries = result.output.replace("\n    ", " ").splitlines()  # a wrapped entry's later lines, joined back
    line = next(line for line in entries if line.strip().startswith("--runtime pymarl"))
    assert "n_envs=1" in line and "sequential=True" in line and "timeout_as_terminal=True" in line
    assert "target_count=pymarl" in line and "oxwhirl/pymarl" in line
    assert any(line.strip().startswith("--runtime semzoo-0.2") and "n_envs=8" in line for line in entries)
    help_text = runner.invoke(app, ["train", "--help"], terminal_width=200).output
    assert "--runtime" in help_text and "PyMARL's episode runner" in " ".join(help_text.split())


def test_a_stored_run_from_before_the_runtime_reads_as_the_former_runtime(tmp_path):
    data = resolved_config(runtime="semzoo-0.2", sequential=True, pinned=("sequential",)).to_dict()
    for key in ("runtime", "pinned"):
        del data[key]
    del data["learner"]["target_count"]
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(data))
    config = read_run_config(run)
    assert (config.runtime, config.learner.target_count, config.n_envs, config.sequential) == (
        "semzoo-0.2", "collected", 8, True)
    assert config.learner.timeout_as_terminal is False
    assert run_labels([config, TrainConfig()]) == ["sem-qmix runtime=semzoo-0.2", "sem-qmix"]


def test_the_metric_rows_log_how_many_episodes_a_time_limit_ended(tmp_path):
    def timeout_rates(**changes) -> list[float]:
        config = TrainConfig(env="matrix:two_step", algo="qmix", steps=40, log_interval=10, test_interval=10**6,
                             save_interval=0, device="cpu", out=str(tmp_path), **changes)
        trainer = Trainer(config, run_dir=tmp_path / f"r{len(list(tmp_path.iterdir()))}", tensorboard=False)
        try:
            trainer.run()
        finally:
            trainer.close()
        rows = (trainer.run_dir / "metrics.csv").read_text().splitlines()
        return [float(row.rsplit(",", 1)[1]) for row in rows if ",timeout_rate," in row]

    assert timeout_rates(episode_limit=1) == [1.0] * 4  # every episode cut at step 1 of 2
    assert set(timeout_rates()) == {0.0}  # the game ends on its own at step 2


def test_a_runtime_field_typed_back_to_the_default_names_the_run_apart_from_its_runtime():
    # the former runtime bootstraps at time limits; a run of it with --timeout-as-terminal (the paper runtime's value
    # and the field's default) is a setting of its own, not pooled with the former runtime's runs
    former = resolved_config(algo="qmix", runtime="semzoo-0.2", sequential=True, pinned=("sequential",))
    terminal = resolved_config(algo="qmix", runtime="semzoo-0.2", sequential=True,
                           learner=LearnerConfig(timeout_as_terminal=True),
                           pinned=("sequential", "learner.timeout_as_terminal"))
    bootstrap = TrainConfig(algo="qmix", learner=LearnerConfig(timeout_as_terminal=False),
                            pinned=("learner.timeout_as_terminal",))
    assert terminal.learner.timeout_as_terminal and not former.learner.timeout_as_terminal
    assert run_labels([former, terminal, TrainConfig(algo="qmix")]) == [
        "qmix runtime=semzoo-0.2", "qmix runtime=semzoo-0.2 timeout_as_terminal=true", "qmix"]
    assert run_labels([former, terminal, bootstrap, TrainConfig(algo="qmix")]) == [
        "qmix runtime=semzoo-0.2", "qmix runtime=semzoo-0.2 timeout_as_terminal=true",
        "qmix timeout_as_terminal=false", "qmix"]
