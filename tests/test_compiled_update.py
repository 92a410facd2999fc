"""The compiled update (``compile_update``, CUDA only): batches padded to a few lengths, the loss unchanged.

Padding is masked (CleanBatch zeroes it, the GRU is causal), so the loss and gradients of a batch padded up to
a bucket are those of the batch as sampled, up to the float rounding of sums over a longer time axis: checked on
the CPU for a single run's loss and for a group's vmapped one (``StackedUpdate``). The compiled functions are
traced on the CPU too, with torch.compile's ``aot_eager`` backend (dynamo and AOT autograd, no C compiler, no
GPU): their losses and gradients are the eager ones. Inductor and CUDA graphs run only where a GPU is visible.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch
from golden_runs import metric_rows
from torch._dynamo.utils import counters

from semzoo import TrainConfig, train
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.learners.batch import bucketed
from semzoo.learners.stacked import StackedUpdate
from semzoo.run.multi import MultiTrainer
from semzoo.run.trainer import COMPILE_SHAPES, Trainer, compile_bucket

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")
SMALL = LearnerConfig(batch_size=8, buffer_size=32)
WRITTEN = MemoryConfig(pending_size=8)
"""The table is written after the first batch, so the loss reads its answers."""
GROUP_SEEDS = (0, 1)
TRACED_REL = 1e-6
"""How close a traced (aot_eager) loss and its gradients must be to the eager ones; equal to the last bit on the
development machine's CPU (the same aten kernels), the margin absorbs another vector ISA's reordered sums."""


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


def _group(algo: str) -> tuple[list[Trainer], StackedUpdate]:
    """Filled runs of ``algo`` with the seeds ``GROUP_SEEDS`` and their stacked update (as a ``--seeds`` group's)."""
    trainers = [_filled(algo, seed=seed) for seed in GROUP_SEEDS]
    return trainers, StackedUpdate([t.learner for t in trainers])


Update = tuple[list[dict[str, float]], list[list[torch.Tensor]]]


def _group_update(trainers: list[Trainer], stacked: StackedUpdate, draw: int) -> Update:
    """One stacked update of ``trainers``, run k on a batch drawn with seed ``draw + k``: its diagnostics and gradients."""
    learners = [t.learner for t in trainers]
    batches = [t.buffer.sample(SMALL.batch_size, torch.Generator().manual_seed(draw + k)) for k, t in enumerate(trainers)]
    stats = stacked.train(learners, batches)
    grads = [[p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in learner.params]
             for learner in learners]
    return stats, grads


def _assert_same_updates(got: Update, want: Update, *, rel: float, grad_rel: float, grad_abs: float) -> None:
    for run, run_want in zip(got[0], want[0], strict=True):
        assert list(run) == list(run_want)  # the same diagnostics, in the same order
        for name, value in run_want.items():
            assert run[name] == pytest.approx(value, rel=rel, abs=1e-9), name
    for run_grads, run_want in zip(got[1], want[1], strict=True):
        for grad, grad_want in zip(run_grads, run_want, strict=True):
            torch.testing.assert_close(grad, grad_want, rtol=grad_rel, atol=grad_abs)


def _record_lengths(stacked: StackedUpdate, lengths: list[int]) -> None:
    """Append to ``lengths`` the time axis of every batch ``stacked``'s vmapped loss meets."""
    vmapped = stacked.vmapped_loss

    def spy(params_K, q_K, clean_K, lookup_K):
        lengths.append(clean_K["reward"].shape[2])
        return vmapped(params_K, q_K, clean_K, lookup_K)

    stacked.vmapped_loss = spy  # type: ignore[method-assign]


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "saem-ow-qmix", "emc-qplex"])
@pytest.mark.parametrize("bucket", [3, 16])
def test_a_group_update_padded_to_a_bucket_gives_each_run_the_loss_and_gradients_of_its_batch(algo, bucket):
    updates, lengths = [], []
    for bucket_steps in (1, bucket):  # two copies of one group
        trainers, stacked = _group(algo)
        _record_lengths(stacked, lengths)
        try:
            stacked.bucket_steps = bucket_steps
            updates.append(_group_update(trainers, stacked, draw=0))
        finally:
            for trainer in trainers:
                trainer.close()
    assert lengths[0] < bucket and lengths[1] == bucket  # one vmapped call each, the second padded
    _assert_same_updates(updates[1], updates[0], rel=1e-6, grad_rel=1e-5, grad_abs=1e-7)


@pytest.mark.parametrize("algo", ["sem-qmix", "saem-ow-qmix", "emc-qplex"])
def test_the_compiled_group_loss_traces_in_one_graph_and_gives_the_eager_losses_and_gradients(algo):
    updates = {}
    for traced in (False, True):  # two copies of one group, three updates each
        trainers, stacked = _group(algo)
        try:
            if traced:
                torch._dynamo.reset()
                counters.clear()
                stacked.compile(8, backend="aot_eager")
            else:
                stacked.bucket_steps = 8
            updates[traced] = [_group_update(trainers, stacked, draw=10 * i) for i in range(3)]
        finally:
            for trainer in trainers:
                trainer.close()
    # The first update runs eagerly (it finds the agent networks the loss reads); the next two call the traced
    # vmapped loss: one graph, no break, traced once and reused.
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1 and counters["aot_autograd"]["ok"] == 1, dict(counters["stats"])
    for got, want in zip(updates[True], updates[False]):
        _assert_same_updates(got, want, rel=TRACED_REL, grad_rel=TRACED_REL, grad_abs=1e-8)


@pytest.mark.parametrize("algo", ["sem-qmix", "saem-ow-qmix", "emc-qplex"])
def test_the_compiled_single_loss_traces_and_gives_the_eager_loss_and_gradients(algo):
    results = []
    for traced in (False, True):
        trainer = _filled(algo)
        try:
            if traced:
                torch._dynamo.reset()
                counters.clear()
                trainer.learner.compile(8, backend="aot_eager")
            else:
                trainer.learner.bucket_steps = 8
            batch = trainer.buffer.sample(SMALL.batch_size, torch.Generator().manual_seed(0))
            results.append(_loss_and_grads(trainer, batch))
        finally:
            trainer.close()
    assert counters["aot_autograd"]["ok"] >= 1  # traced, in pieces: dynamo does not trace nn.GRU, which runs eagerly
    assert counters["graph_break"] and all("GRU" in reason for reason in counters["graph_break"])
    (loss, stats, grads), (loss_traced, stats_traced, grads_traced) = results
    assert loss_traced == pytest.approx(loss, rel=TRACED_REL, abs=1e-9)
    assert list(stats_traced) == list(stats)
    for name, value in stats.items():
        assert stats_traced[name] == pytest.approx(value, rel=TRACED_REL, abs=1e-9), name
    for grad, grad_traced in zip(grads, grads_traced, strict=True):
        torch.testing.assert_close(grad_traced, grad, rtol=TRACED_REL, atol=1e-8)


def test_compile_update_leaves_a_cpu_group_on_the_plain_stacked_update(tmp_path):
    config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=64, n_envs=8, compile_update=True,
                         out=str(tmp_path), learner=SMALL, memory=WRITTEN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        group = MultiTrainer.create(config, GROUP_SEEDS, tensorboard=False)
    try:
        assert any("compile_update applies on a CUDA device only" in str(w.message) for w in caught)
        assert group._stacked is not None and group._stacked.compiled_loss is None
        assert group._stacked.bucket_steps == 1
        results = group.run()
    finally:
        group.close()
    assert all(math.isfinite(result["test_return_mean"]) for result in results)
    assert all(t.counters.updates > 0 for t in group.trainers)


def test_a_group_trained_with_its_vmapped_loss_traced_logs_the_plain_groups_rows(tmp_path):
    """The traced loss inside ``MultiTrainer``'s loop: several updates, target syncs and table writes."""
    rows = {}
    for traced in (False, True):
        config = TrainConfig(env="matrix:two_step", algo="sem-qmix", steps=160, n_envs=8, log_interval=32,
                             test_interval=80, test_episodes=4, out=str(tmp_path / f"traced_{traced}"),
                             learner=dataclasses.replace(SMALL, target_update_episodes=16), memory=WRITTEN)
        group = MultiTrainer.create(config, GROUP_SEEDS, tensorboard=False)
        try:
            assert group._stacked is not None
            if traced:  # what MultiTrainer does on a CUDA device, with the CPU's backend
                torch._dynamo.reset()
                counters.clear()
                group._stacked.compile(compile_bucket(group.trainers[0].max_t), backend="aot_eager")
            group.run()
        finally:
            group.close()
        rows[traced] = [metric_rows(t.run_dir) for t in group.trainers]
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    for run, run_plain in zip(rows[True], rows[False], strict=True):
        assert [row[:4] for row in run] == [row[:4] for row in run_plain]
        assert any(row[3] == "loss" for row in run)
        for row, row_plain in zip(run, run_plain):
            assert row[4] == pytest.approx(row_plain[4], rel=TRACED_REL, abs=1e-9), row[:4]


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
