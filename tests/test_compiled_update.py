"""The compiled update (``compile_update``, CUDA only): batches padded to a few lengths, the loss unchanged.

Padding is masked (CleanBatch zeroes it, the GRU is causal), so the loss and gradients of a batch padded up to
a bucket are those of the batch as sampled, up to the float rounding of sums over a longer time axis. That is
checked on the CPU; the compiled path itself only where a GPU is visible.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from semzoo import TrainConfig, train
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.learners.batch import bucketed
from semzoo.run.trainer import COMPILE_SHAPES, Trainer, compile_bucket

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")
SMALL = LearnerConfig(batch_size=8, buffer_size=32)
WRITTEN = MemoryConfig(pending_size=8)
"""The table is written after the first batch, so the loss reads its answers."""


def _filled(algo: str, device: str = "cpu", **config: object) -> Trainer:
    trainer = Trainer(TrainConfig(env="matrix:two_step", algo=algo, steps=64, n_envs=8, device=device,
                                  sequential=True, learner=SMALL, memory=WRITTEN, **config))  # type: ignore[arg-type]
    trainer.collect()
    return trainer


def _loss_and_grads(trainer: Trainer, batch) -> tuple[float, dict[str, float], list[torch.Tensor]]:
    learner = trainer.learner
    learner.optimizer.zero_grad(set_to_none=True)
    loss, stats = learner.compute_loss(batch)
    loss.backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in learner.params]
    return loss.item(), stats, grads


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "saem-ow-qmix", "emc-qplex"])
@pytest.mark.parametrize("bucket", [3, 8, 16])
def test_a_batch_padded_to_a_bucket_has_the_loss_and_gradients_of_the_batch_as_sampled(algo, bucket):
    results = []
    for bucket_steps in (1, bucket):  # two copies of one run (a memory's phase 1 may train, as EMC's curiosity does)
        trainer = _filled(algo)
        try:
            batch = trainer.buffer.sample(SMALL.batch_size, torch.Generator().manual_seed(0))
            padded = bucketed(batch, bucket_steps)
            assert padded.max_t == math.ceil(batch.max_t / bucket_steps) * bucket_steps
            trainer.learner.bucket_steps = bucket_steps  # compute_loss pads every batch itself
            results.append(_loss_and_grads(trainer, batch))
        finally:
            trainer.close()
    (loss, stats, grads), (loss_padded, stats_padded, grads_padded) = results
    assert bucketed(batch, bucket).max_t > batch.max_t
    assert loss_padded == pytest.approx(loss, rel=1e-6, abs=1e-9)
    assert stats_padded.keys() == stats.keys()
    for name, value in stats.items():
        assert stats_padded[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    for grad, grad_padded in zip(grads, grads_padded):
        torch.testing.assert_close(grad_padded, grad, rtol=1e-5, atol=1e-7)


def test_the_bucket_cuts_every_episode_limit_into_a_few_multiples_of_eight():
    for max_t in (1, 2, 8, 60, 100, 120, 150, 200, 400):
        bucket = compile_bucket(max_t)
        assert bucket % 8 == 0 and math.ceil(max_t / bucket) <= COMPILE_SHAPES
    assert compile_bucket(100) == 16 and compile_bucket(2) == 8


def test_compile_update_leaves_a_cpu_run_on_the_plain_update():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = _filled("sem-qmix", compile_update=True)
    try:
        assert any("compile_update applies on a CUDA device only" in str(w.message) for w in caught)
        assert trainer.learner.compiled_loss is None and trainer.learner.bucket_steps == 1
    finally:
        trainer.close()


@needs_gpu
@pytest.mark.parametrize("algo", ["qmix", "sem-qmix"])
def test_a_compiled_update_on_the_gpu_gives_the_plain_loss(algo):
    losses = {}
    for compiled in (False, True):
        trainer = _filled(algo, device="cuda", compile_update=compiled)
        try:
            assert (trainer.learner.compiled_loss is not None) == compiled
            batch = trainer.buffer.sample(SMALL.batch_size, torch.Generator().manual_seed(0)).for_update("cuda")
            losses[compiled] = [trainer.learner.train(batch)["loss"] for _ in range(3)]
        finally:
            trainer.close()
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)


@needs_gpu
def test_a_run_with_the_compiled_update_trains_on_the_gpu(tmp_path):
    config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=200, n_envs=4, test_interval=100,
                         test_episodes=4, device="cuda", compile_update=True, out=str(tmp_path), learner=SMALL)
    _, result = train(config, progress=False)
    assert math.isfinite(result["test_return_mean"])
