"""The GPU path: every algorithm id trains with ``device="cuda"`` (skipped where no GPU is visible).

The CPU-side half runs everywhere: exploration draws its random numbers on the CPU from the run's
generator whatever device the Q values are on (a CPU generator cannot draw on a GPU), so a seed
explores alike on every device.
"""

from __future__ import annotations

import math

import pytest
import torch

from semzoo import TrainConfig, algorithm_ids, train
from semzoo.agents.selection import epsilon_greedy
from semzoo.config import LearnerConfig
from semzoo.run.trainer import Trainer

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")
SMALL = LearnerConfig(batch_size=4, buffer_size=16)


def test_exploration_draws_on_the_cpu_generator_whatever_the_device():
    avail = torch.ones(4, 3, 5, dtype=torch.bool)
    avail[:, :, 0] = False
    q = torch.zeros(4, 3, 5)
    on_cpu = epsilon_greedy(q, avail, 1.0, torch.Generator().manual_seed(3))
    on_meta = epsilon_greedy(q.to("meta"), avail.to("meta"), 1.0, torch.Generator().manual_seed(3))
    assert on_meta.device.type == "meta" and on_meta.shape == on_cpu.shape
    assert (on_cpu > 0).all()  # never the unavailable action 0


@needs_gpu
@pytest.mark.parametrize("algo", algorithm_ids())
def test_every_algorithm_trains_on_the_gpu(tmp_path, algo):
    config = TrainConfig(env="matrix:two_step", algo=algo, steps=200, n_envs=4, test_interval=100, test_episodes=4,
                         device="cuda", out=str(tmp_path), learner=SMALL)
    _, result = train(config, progress=False)
    assert math.isfinite(result["test_return_mean"])


@needs_gpu
@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "saem-ow-qmix"])
def test_the_first_loss_on_the_gpu_equals_the_cpu_one(algo):
    losses = {}
    for device in ("cpu", "cuda"):
        trainer = Trainer(TrainConfig(env="matrix:two_step", algo=algo, steps=40, n_envs=4, device=device,
                                      learner=SMALL))
        try:
            trainer.collect()
            batch = trainer.buffer.sample(4, torch.Generator().manual_seed(0)).to(trainer.device)
            losses[device] = trainer.learner.compute_loss(batch)[0].item()
        finally:
            trainer.close()
    assert losses["cuda"] == pytest.approx(losses["cpu"], rel=1e-5)
