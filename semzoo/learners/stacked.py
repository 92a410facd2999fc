"""One gradient update of K runs at once: the loss of eq. (6) vmapped over their stacked parameters.

K learners of one config (different seeds) each bring a batch sampled from their own buffer:

    pad the K batches to a common length T          (padding is masked and the GRU is causal: no real step changes)
    per run: CleanBatch, the episodic table lookup   (numpy, outside vmap)
    stack every run's parameters; vmap(grad(QLearner.loss)) through run 0's modules with each run's parameters
    per run: gradients into its own modules' .grad, then its own QLearner.step (clip + RMSprop)

The many small ops of an update (the mixer's hypernetworks, masks, the loss) are dispatched once for K runs
instead of K times. Each learner and its optimiser stay the single source of truth: checkpoints,
evaluation and resume read them as in a single run. The loss is ``QLearner.loss`` itself, not a copy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from semzoo.episodic.target import TableLookup
from semzoo.learners.batch import CleanBatch
from semzoo.learners.q_learner import QLearner, stats_to_floats
from semzoo.types import EpisodeBatch


def pad_batch(batch: EpisodeBatch, n_steps: int) -> EpisodeBatch:
    """``batch`` with its time axis padded to ``n_steps`` steps (zeros, false: padding, masked by every consumer)."""
    extra = n_steps - batch.reward.shape[1]
    if extra == 0:
        return batch
    assert extra > 0, "pad_batch only lengthens a batch"

    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x.new_zeros((x.shape[0], extra, *x.shape[2:]))], dim=1)

    return dataclasses.replace(batch, **{f.name: pad(getattr(batch, f.name)) for f in dataclasses.fields(batch)
                                         if f.name != "length"})


class _Loss(nn.Module):
    """A learner's networks as one module whose forward is the learner's loss (for ``functional_call``)."""

    def __init__(self, learner: QLearner) -> None:
        super().__init__()
        self.nets = nn.ModuleDict(learner.networks())
        self.learner = learner

    def forward(self, clean: dict[str, torch.Tensor],
                lookup: dict[str, torch.Tensor] | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.learner.loss(CleanBatch(**clean), None if lookup is None else TableLookup(**lookup))


def _fields(x: Any) -> dict[str, torch.Tensor]:
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


class StackedUpdate:
    """The gradient step of several learners of one config, vmapped; ``train`` matches each ``QLearner.train``.

    ``learners`` fixes the group (same class, config and network sizes); any subset of them may update at
    a time (a run that finished, or whose buffer cannot sample yet, sits out).
    """

    def __init__(self, learners: Sequence[QLearner]) -> None:
        if not learners:
            raise ValueError("StackedUpdate needs at least one learner")
        first = learners[0]
        for learner in learners[1:]:
            if type(learner) is not type(first) or learner.config != first.config \
                    or learner.memory_config != first.memory_config or learner.memory_kind != first.memory_kind:
                raise ValueError("the learners of a StackedUpdate must share the algorithm and config (seeds may differ)")
        self.modules = [_Loss(learner) for learner in learners]
        self.template = self.modules[0]
        shapes = {name: p.shape for name, p in self.template.named_parameters()}
        for module, learner in zip(self.modules, learners):
            if {name: p.shape for name, p in module.named_parameters()} != shapes:
                raise ValueError("the learners of a StackedUpdate must have networks of the same sizes")
            trained = {id(p) for p in module.parameters() if p.requires_grad}
            assert trained == {id(p) for p in learner.params}, "the trained networks hold exactly QLearner.params"
        self._index = {id(learner): i for i, learner in enumerate(learners)}

        def loss(trained: dict[str, torch.Tensor], frozen: dict[str, torch.Tensor], clean: dict[str, torch.Tensor],
                 lookup: dict[str, torch.Tensor] | None) -> tuple[torch.Tensor, tuple[torch.Tensor, Any]]:
            value, stats = functional_call(self.template, {**trained, **frozen}, (clean, lookup), strict=True)
            return value, (value.detach(), stats)

        self._grad_loss = grad(loss, has_aux=True)

    def train(self, learners: Sequence[QLearner], batches: Sequence[EpisodeBatch]) -> list[dict[str, float]]:
        """One gradient step of each of ``learners`` on its batch; the diagnostics of each, as ``QLearner.train``."""
        if len(learners) != len(batches) or not learners:
            raise ValueError(f"{len(learners)} learners and {len(batches)} batches: expected one batch per learner")
        modules = [self.modules[self._index[id(learner)]] for learner in learners]
        n_steps = max(batch.reward.shape[1] for batch in batches)
        cleans = [CleanBatch.from_batch(pad_batch(batch, n_steps)) for batch in batches]
        lookups = [learner.table_lookup(clean) for learner, clean in zip(learners, cleans)]
        clean_K = {name: torch.stack([getattr(c, name) for c in cleans]) for name in _fields(cleans[0])}
        lookup_K = None
        if lookups[0] is not None:
            lookup_K = {name: torch.stack([getattr(lk, name) for lk in lookups]) for name in _fields(lookups[0])}
        named = [dict(module.named_parameters()) for module in modules]
        trained_K: dict[str, torch.Tensor] = {}
        frozen_K: dict[str, torch.Tensor] = {}
        for name, p in named[0].items():
            stacked = torch.stack([params[name].detach() for params in named])
            (trained_K if p.requires_grad else frozen_K)[name] = stacked
        in_dims = (0, 0, 0, None if lookup_K is None else 0)
        grads_K, (loss_K, stats_K) = vmap(self._grad_loss, in_dims=in_dims)(trained_K, frozen_K, clean_K, lookup_K)
        results = []
        for k, (learner, params) in enumerate(zip(learners, named)):
            for name, g in grads_K.items():
                params[name].grad = g[k]
            stats = stats_to_floats({name: value[k] for name, value in stats_K.items()})
            stats.update(loss=float(loss_K[k]), grad_norm=learner.step())
            results.append(stats)
        return results


__all__ = ["StackedUpdate", "pad_batch"]
