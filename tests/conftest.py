"""Shared fixtures: small, fast configurations."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # tests run in parallel on 2 cores; one thread each avoids oversubscription


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
