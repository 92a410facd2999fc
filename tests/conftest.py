"""Shared fixtures: small, fast configurations."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # tests run in parallel on 2 cores; one thread each avoids oversubscription

NO_ACTOR = {"sequential": True}
"""Config fields for a test that trains a run but does not test the training loop: the sequential loop
(collect, then learn) starts no actor process, which the default overlapped loop does (2 s for a matrix
game, 12-20 s for SMAX) and then keeps busy on a second core. Tests of the overlapped loop itself
(test_overlap, test_actor, the overlapped cases of test_checkpoint and test_evaluate, test_kill_resume and
the CLI's test_short_train_run_writes_metrics) keep the default."""
NO_ACTOR_FLAGS = ("--sequential",)
"""``NO_ACTOR`` as `semzoo train` flags."""


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


def record_losses(trainer) -> list[float]:
    """A list that receives the loss of every gradient step ``trainer`` takes from now on."""
    losses: list[float] = []
    train_step = trainer.learner.train

    def recording(batch):
        stats = train_step(batch)
        losses.append(stats["loss"])
        return stats

    trainer.learner.train = recording
    return losses
