"""One gradient update of K runs at once: the loss of eq. (6) vmapped over their stacked parameters.

K learners of one config (different seeds) each bring a batch sampled from their own buffer:

    pad the K batches to a common length T          (padding is masked and the GRU is causal: no real step changes)
    per run: CleanBatch, the memory's lookup_batch   (numpy, outside vmap)
    per run: the agent networks' Q_a                 (the fused CPU GRU kernel, outside vmap)
    stack the runs' mixer parameters; vmap(QLearner.loss) through run 0's code with each run's parameters and Q_a
    backward of the summed losses                    (each run's gradients reach its own modules)
    per run: its own QLearner.step (clip + RMSprop)

With ``compile`` (a CUDA device's ``compile_update``) every batch of a call is padded up to the same multiple of
``bucket_steps`` and the vmapped loss (and so its backward) runs under ``torch.compile``, CUDA graphs on a GPU.

The many small ops of an update (the mixers' hypernetworks, masks, targets, the loss) are dispatched once
for K runs instead of K times. Each learner and its optimiser stay the single source of truth: checkpoints,
evaluation and resume read them as in a single run. The loss is ``QLearner.loss`` itself, not a copy.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from semzoo.agents.rnn import RNNAgent
from semzoo.learners.batch import pad_batch
from semzoo.learners.q_learner import QLearner, compiled_update, stats_to_floats
from semzoo.types import CleanBatch, EpisodeBatch

PAD_RATIO = 1.5
"""Batches longer than this times the shortest of a vmapped call go to another call: padding costs compute
(one SMAX episode that hit the time limit can make a batch four times the length of the others)."""


class _GivenQ(nn.Module):
    """Stands in for an agent network inside the vmapped loss: returns the Q_a [B,T+1,A,U] computed before it.

    The agents' GRUs run outside vmap, one run at a time (PyTorch's fused CPU GRU kernel has no batching rule,
    and its decomposition under vmap is about twice as slow). The Q_a arrive as the buffer ``q`` through
    ``functional_call``, like the mixers' parameters; ``used`` records whether an eager loss read them.
    """

    q: torch.Tensor | None

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("q", None, persistent=False)
        self.used = False

    def build_inputs(self, obs_BTAO: torch.Tensor, last_action_BTA: torch.Tensor) -> torch.Tensor:
        return obs_BTAO

    def forward(self, inputs_BTAI: torch.Tensor, hidden_BAH: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        assert self.q is not None, "the agent's Q values are computed before the vmapped loss"
        if not torch.compiler.is_compiling():  # a compiled loss has no side effect; the first update runs eagerly
            self.used = True
        return self.q, None


class _Loss(nn.Module):
    """A learner's mixing networks as one module whose forward is the learner's loss (for ``functional_call``)."""

    def __init__(self, learner: QLearner) -> None:
        super().__init__()
        self.nets = nn.ModuleDict({name: net for name, net in learner.networks().items()
                                   if not isinstance(net, RNNAgent)})
        self.learner = learner
        self.lookup_type: Any = None
        """The dataclass of the memory's ``lookup_batch`` (rebuilt here from its fields, one run's under vmap)."""

    def forward(self, clean: dict[str, torch.Tensor],
                lookup: dict[str, torch.Tensor] | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.learner.loss(CleanBatch(**clean), None if lookup is None else self.lookup_type(**lookup))


def _fields(x: Any) -> dict[str, torch.Tensor]:
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


class StackedUpdate:
    """The gradient step of several learners of one config, vmapped; ``train`` matches each ``QLearner.train``.

    ``learners`` fixes the group (same class, config and network sizes); any subset of them may update at
    a time (a run that finished, or whose buffer cannot sample yet, sits out).

    The loss runs once for all runs: ``QLearner.loss`` of a shallow copy of the first learner whose agent
    networks are stand-ins (``_GivenQ``) holding every run's Q_a, computed run by run beforehand, and whose
    mixers take each run's parameters through ``functional_call`` under ``vmap``. One backward pass of the
    summed losses then gives each run its own gradients (the losses share no parameter).
    """

    def __init__(self, learners: Sequence[QLearner]) -> None:
        if not learners:
            raise ValueError("StackedUpdate needs at least one learner")
        first = learners[0]
        for learner in learners[1:]:
            if type(learner) is not type(first) or learner.config != first.config \
                    or learner.memory_config != first.memory_config or learner.memory_kind != first.memory_kind:
                raise ValueError("the learners of a StackedUpdate must share the algorithm and config (seeds may differ)")
        self.agent_names = [name for name, net in first.networks().items() if isinstance(net, RNNAgent)]
        self.modules = [_Loss(learner) for learner in learners]
        shapes = {name: p.shape for name, p in self.modules[0].named_parameters()}
        for module in self.modules:
            if {name: p.shape for name, p in module.named_parameters()} != shapes:
                raise ValueError("the learners of a StackedUpdate must have networks of the same sizes")
        template = copy.copy(first)  # the same config and mixers; its agents become stand-ins
        self.given = {name: _GivenQ() for name in self.agent_names}
        for name, stand_in in self.given.items():
            setattr(template, name, stand_in)
        self.template = _Loss(template)
        # functional_call is not strict (the stand-ins' Q_a buffers are set only for the networks the loss reads):
        # every parameter the template holds is one of the runs' stacked ones.
        assert {name: p.shape for name, p in self.template.named_parameters()} == shapes
        self._read: list[str] | None = None  # the agent networks the loss reads, known after the first update
        self._index = {id(learner): i for i, learner in enumerate(learners)}
        self.bucket_steps = 1
        """Every batch of a vmapped call is padded up to the same multiple of this many steps (1: to the longest)."""
        self.compiled_loss: Any = None
        """``vmapped_loss`` compiled by ``compile`` (None: the plain ``vmapped_loss``)."""

    def compile(self, bucket_steps: int, *, backend: str = "inductor") -> None:
        """Compile ``vmapped_loss`` (``torch.compile``; with inductor, mode reduce-overhead: CUDA graphs) for a GPU.

        All the batches of an update are padded up to one multiple of ``bucket_steps`` and go to one vmapped call,
        so episode lengths give a few shapes rather than one compile each; the padding is masked, so each run's
        loss is that of its batch as sampled, up to the float rounding of sums over a longer time axis. The
        first update runs eagerly (it finds which agent networks the loss reads). ``backend`` other than
        inductor (``aot_eager``) traces the same function without a C compiler or a GPU: the CPU tests do.
        """
        self.compiled_loss = compiled_update(self.vmapped_loss, bucket_steps, backend)  # refuses bucket_steps < 1 first
        self.bucket_steps = bucket_steps

    def _loss(self, params: dict[str, torch.Tensor], q: dict[str, torch.Tensor], clean: dict[str, torch.Tensor],
              lookup: dict[str, torch.Tensor] | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One run's loss and diagnostics (called under vmap, so every tensor here is one run's)."""
        given = {f"nets.{name}.q": q_BTAU for name, q_BTAU in q.items()}  # the stand-ins' buffers, unset ones left None
        return functional_call(self.template, {**params, **given}, (clean, lookup), strict=False)

    def vmapped_loss(self, params_K: dict[str, torch.Tensor], q_K: dict[str, torch.Tensor],
                     clean_K: dict[str, torch.Tensor], lookup_K: dict[str, torch.Tensor] | None,
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The K runs' losses [K] and diagnostics ([K] each): ``_loss`` vmapped over every input's leading run axis.

        Tensor work only (the table's lookup and the agents' GRUs ran before it), so ``compile`` compiles it whole;
        its backward reaches ``params_K`` and, through ``q_K``, the agents' networks.
        """
        in_dims = (0, 0, 0, None if lookup_K is None else 0)
        return vmap(self._loss, in_dims=in_dims)(params_K, q_K, clean_K, lookup_K)

    def train(self, learners: Sequence[QLearner], batches: Sequence[EpisodeBatch]) -> list[dict[str, float]]:
        """One gradient step of each of ``learners`` on its batch; the diagnostics of each, as ``QLearner.train``.

        Runs whose batches have similar lengths (within ``PAD_RATIO``) update in one vmapped call; a run
        left alone takes the plain ``QLearner.train``. Compiled, all runs share one call: on a GPU the padding
        costs less than another call, and every split would be another shape to compile.
        """
        if len(learners) != len(batches) or not learners:
            raise ValueError(f"{len(learners)} learners and {len(batches)} batches: expected one batch per learner")
        length = [batch.reward.shape[1] for batch in batches]
        chunks: list[list[int]] = []
        for i in sorted(range(len(batches)), key=lambda i: length[i]):
            if chunks and (self.compiled_loss is not None or length[i] <= PAD_RATIO * length[chunks[-1][0]]):
                chunks[-1].append(i)
            else:
                chunks.append([i])
        results: list[dict[str, float]] = [{} for _ in batches]
        for chunk in chunks:
            if len(chunk) == 1:
                done = [learners[chunk[0]].train(batches[chunk[0]])]
            else:
                done = self._train_together([learners[i] for i in chunk], [batches[i] for i in chunk])
            for i, stats in zip(chunk, done):
                results[i] = stats
        return results

    def _train_together(self, learners: Sequence[QLearner], batches: Sequence[EpisodeBatch]) -> list[dict[str, float]]:
        """One vmapped gradient step of ``learners``, each on its batch."""
        modules = [self.modules[self._index[id(learner)]] for learner in learners]
        own = [CleanBatch.from_batch(batch) for batch in batches]
        for learner in learners:
            learner.optimizer.zero_grad(set_to_none=True)
        # Q_a of every agent network the loss reads, run by run on the run's own batch (with gradient for the
        # trained ones), then padded with zeros like the batch: the GRU is causal and the loss masks padding.
        n_steps = max(clean.reward.shape[1] for clean in own)
        n_slots = -(-n_steps // self.bucket_steps) * self.bucket_steps + 1
        q_K: dict[str, torch.Tensor] = {}
        for name in self._read if self._read is not None else self.agent_names:
            per_run = []
            for learner, clean in zip(learners, own):
                agent = getattr(learner, name)
                with torch.set_grad_enabled(any(p.requires_grad for p in agent.parameters())):
                    q = learner.agent_q(agent, clean)
                per_run.append(torch.cat([q, q.new_zeros((q.shape[0], n_slots - q.shape[1], *q.shape[2:]))], dim=1))
            q_K[name] = torch.stack(per_run)
        padded = [pad_batch(batch, n_slots - 1) for batch in batches]
        cleans = [CleanBatch.from_batch(batch) for batch in padded]
        lookups = [learner.table_lookup(clean, batch.state_keys)
                   for learner, clean, batch in zip(learners, cleans, padded)]
        clean_K = {name: torch.stack([getattr(c, name) for c in cleans]) for name in _fields(cleans[0])}
        lookup_K = None
        if lookups[0] is not None:
            lookup_K = {name: torch.stack([getattr(lk, name) for lk in lookups]) for name in _fields(lookups[0])}
            self.template.lookup_type = type(lookups[0])
        named = [dict(module.named_parameters()) for module in modules]
        params_K = {name: torch.stack([params[name].detach() for params in named]).requires_grad_(p.requires_grad)
                    for name, p in named[0].items()}
        if self._read is None or self.compiled_loss is None:
            for stand_in in self.given.values():
                stand_in.used = False
            loss_K, stats_K = self.vmapped_loss(params_K, q_K, clean_K, lookup_K)
            if self._read is None:
                self._read = [name for name, stand_in in self.given.items() if stand_in.used]
        else:
            torch.compiler.cudagraph_mark_step_begin()  # the graphs' outputs of the last update are no longer read
            loss_K, stats_K = self.compiled_loss(params_K, q_K, clean_K, lookup_K)
        loss_K.sum().backward()  # the runs share no parameter: each gets its own loss's gradient
        results = []
        for k, (learner, params) in enumerate(zip(learners, named)):
            for name, stacked in params_K.items():
                if stacked.grad is not None:
                    params[name].grad = stacked.grad[k]
            stats = stats_to_floats({name: value[k] for name, value in stats_K.items()})
            stats.update(loss=float(loss_K[k].detach()), grad_norm=learner.step())
            results.append(stats)
        return results


__all__ = ["StackedUpdate", "pad_batch"]
