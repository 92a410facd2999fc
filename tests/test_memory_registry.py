"""Memories are registered objects: the registry, the learner's memory hooks, the trainer's schedule hooks, and a
user memory (tests/plugins/toy_memory_plugin.py) trained by id from Python, from the CLI, in a multi-seed group,
and resumed exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NO_ACTOR, NO_ACTOR_FLAGS, plugin_process_env
from test_checkpoint import assert_cli_resume_is_exact
from test_memory_learner import make_batch, make_learner
from typer.testing import CliRunner

import semzoo
from semzoo.algos import algorithm_ids, parse_algorithm, register_algorithm
from semzoo.cli import app
from semzoo.config import ExplorationConfig, LearnerConfig, TrainConfig
from semzoo.episodic import memory as registry
from semzoo.episodic.memory import Memory, memory_class, memory_names, register_memory
from semzoo.episodic.sem import SAEMTable, SEMTable
from semzoo.run.multi import train_seeds
from semzoo.run.trainer import Trainer
from semzoo.runfiles import read_metrics

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture
def toy(monkeypatch):
    """The plugin module, imported as a user's code would be (it registers the memory "best")."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    import toy_memory_plugin

    return toy_memory_plugin


@pytest.fixture
def scratch_name():
    """A memory name free for the test, unregistered afterwards."""
    yield "scratch"
    registry._REGISTRY.pop("scratch", None)


# ----- the registry ------------------------------------------------------------------------------------------

def test_sem_and_saem_are_registered_memories_exported_by_semzoo():
    assert semzoo.register_memory is register_memory and semzoo.Memory is Memory
    assert semzoo.memory_names()[:2] == ["sem", "saem"]
    assert memory_class("sem") is SEMTable and memory_class("saem") is SAEMTable
    assert (SEMTable.name, SAEMTable.name) == ("sem", "saem")


def test_registering_the_same_class_again_changes_nothing():
    assert register_memory("sem")(SEMTable) is SEMTable
    assert memory_names()[:2] == ["sem", "saem"] and memory_class("sem") is SEMTable


def test_another_class_under_a_taken_name_is_refused_unless_replace(scratch_name):
    class First(SEMTable):
        pass

    class Second(SEMTable):
        pass

    with pytest.raises(ValueError, match=r"^memory name 'sem' is already registered to .*SEMTable; .*replace=True"):
        register_memory("sem")(First)
    assert memory_class("sem") is SEMTable
    register_memory(scratch_name)(First)
    with pytest.raises(ValueError, match="already registered"):
        register_memory(scratch_name)(Second)
    register_memory(scratch_name, replace=True)(Second)
    assert memory_class(scratch_name) is Second and f"{scratch_name}-qmix" in algorithm_ids()


@pytest.mark.parametrize("name", ["", "a-b", "none"])
def test_a_memory_name_that_cannot_prefix_an_id_is_refused(name):
    with pytest.raises(ValueError, match="expected a non-empty name without '-'"):
        register_memory(name)


def test_only_memory_classes_register(scratch_name):
    with pytest.raises(TypeError, match=r"subclass of semzoo\.episodic\.memory\.Memory"):
        register_memory(scratch_name)(dict)  # type: ignore[type-var]


def test_an_unknown_memory_prefix_is_a_one_line_error_listing_the_memories():
    with pytest.raises(ValueError, match=r"unknown memory 'emx' in algorithm 'emx-qmix': expected one of sem, saem"):
        parse_algorithm("emx-qmix")
    result = CliRunner().invoke(app, ["train", "--env", "matrix:two_step", "--algo", "emx-qmix", "--steps", "10"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "unknown memory 'emx'" in lines[0] and "sem, saem" in lines[0]


def test_a_row_cannot_take_a_registered_memory_prefix(toy):
    from semzoo.algos import Algorithm

    with pytest.raises(ValueError, match="best-"):
        register_algorithm(Algorithm("best-thing", "qmix"))


# ----- the learner's hooks -----------------------------------------------------------------------------------

def test_a_memory_intrinsic_reward_joins_the_td_target_and_its_losses_the_loss(toy):
    class Plain(toy.BestReturnMemory):
        def intrinsic_reward(self, lookup, clean, next_value_BT):
            return None

    class WithLoss(toy.BestReturnMemory):
        def memory_losses(self, lookup, values):
            return {"probe": 0.5 * (values.q_tot_BT ** 2 * values.clean.mask).sum()}

    batch = make_batch()
    stats, losses = {}, {}
    for name, cls in (("plain", Plain), ("bonus", toy.BestReturnMemory), ("loss", WithLoss)):
        memory = cls(gamma=0.9)
        memory.on_store(batch, None)
        learner = make_learner(memory, lam=0.0)  # lambda 0: the loss is the TD loss (plus the memory's losses)
        losses[name], stats[name] = learner.compute_loss(batch)
    bonus = toy.BONUS / (1 + batch.batch_size) ** 0.5
    assert stats["bonus"]["target_y"] == pytest.approx(stats["plain"]["target_y"] + bonus, rel=1e-6)
    assert stats["bonus"]["reward_intrinsic"] == pytest.approx(bonus) and "reward_intrinsic" not in stats["plain"]
    assert stats["loss"]["loss_probe"] > 0
    assert losses["loss"].item() == pytest.approx(losses["bonus"].item() + stats["loss"]["loss_probe"], rel=1e-6)
    assert stats["bonus"]["memory_hit_rate"] == 1.0


# ----- the trainer's schedule hooks, and the user memory trained by id ---------------------------------------

def toy_config(out: Path, *, steps: int = 300, seed: int = 0, **kw) -> TrainConfig:
    """matrix:two_step, 8 envs: 16 env steps and 8 episodes per iteration; a target sync every 3 iterations."""
    return TrainConfig(**{**NO_ACTOR, **kw}, env="matrix:two_step", algo="best-qmix", steps=steps, seed=seed, n_envs=8,
                       test_episodes=8, test_interval=10**9, log_interval=64, out=str(out), device="cpu",
                       exploration=ExplorationConfig(epsilon_anneal_steps=200),
                       learner=LearnerConfig(batch_size=16, buffer_size=64, target_update_episodes=20))


def test_the_trainer_calls_every_schedule_hook_of_a_user_memory(toy):
    trainer = Trainer(toy_config(Path("unused")))
    syncs = []
    sync = trainer.learner.update_target
    trainer.learner.update_target = lambda: (syncs.append(trainer.counters.episodes), sync())[1]
    try:
        trainer.run()
    finally:
        trainer.close()
    memory, c = trainer.memory, trainer.counters
    assert isinstance(memory, toy.BestReturnMemory) and trainer.learner.memory_kind == "best"
    assert memory.counts == {"stores": c.episodes, "updates": c.updates, "target_syncs": len(syncs),
                             "env_step_calls": c.env_steps // toy.ENV_STEP_INTERVAL}
    assert c.updates > 0 and len(syncs) >= 3 and memory.best > 0  # the two-step game pays up to 8


def test_a_user_memory_trains_in_a_multi_seed_group(toy, tmp_path):
    runs = train_seeds(toy_config(tmp_path), [0, 1], progress=False, tensorboard=False)
    for run_dir, _ in runs:
        rows = read_metrics(run_dir)
        last = {r["name"]: r["value"] for r in rows if r["env_steps"] == max(x["env_steps"] for x in rows)}
        assert last["memory_hit_rate"] == 1.0 and last["memory_stores"] > 0 and last["memory_updates"] > 0
        final = json.loads((run_dir / "final.json").read_text())
        assert final["updates"] == last["memory_updates"]


@pytest.mark.slow
def test_a_user_memory_trains_by_id_from_the_cli_and_resumes_exactly(tmp_path):
    env = plugin_process_env()
    cli = [sys.executable, "-m", "semzoo.cli", "--plugin", "toy_memory_plugin"]
    listing = subprocess.run([*cli, "algos"], capture_output=True, text=True, env=env, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "best-" in listing.stdout and "toy plugin" in listing.stdout
    flags = ["--env", "matrix:two_step", "--algo", "best-qmix", "--n-envs", "8",
             "--device", "cpu", "--log-interval", "64", "--test-interval", "96", "--test-episodes", "8",
             "--save-interval", "64", "--batch-size", "16", "--buffer-size", "64", "--target-update-episodes", "20",
             "--no-tensorboard", *NO_ACTOR_FLAGS]

    def semzoo_cli(*args: str) -> None:
        done = subprocess.run([*cli, "train", *args], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr

    a = assert_cli_resume_is_exact(semzoo_cli, tmp_path, flags, steps=300, stop_at=150,
                                   logs=("memory_target_syncs", "loss_em"))
    assert a["counters"]["env_steps"] >= 300 and a["memory"]["updates"] == a["counters"]["updates"] > 0



def test_a_memory_states_what_it_adds_to_the_loss_by_the_hooks_it_overrides():
    from semzoo.episodic.memory import memory_class

    adds = {name: (cls.adds_reward, cls.adds_target, cls.adds_loss)
            for name in ("sem", "saem", "mc", "emc", "emu", "lagma") for cls in [memory_class(name)]}
    assert adds == {"sem": (False, True, False), "saem": (False, True, False), "mc": (False, True, False),
                    "emc": (True, False, True), "emu": (True, False, False), "lagma": (True, False, False)}
