"""A run's memory, worked out from the env's sizes and the config before anything big is allocated.

    replay buffer   expected: ``buffer_size`` episodes of the env's typical length (``TYPICAL_LENGTH``, else
                    the limit); worst: every episode at the limit, or every env step the run can play
                    (``steps`` plus two iterations' overshoot), whichever is less, with the store's growth
                    slack (``semzoo.replay.buffer``)
    its copies      while a checkpoint is saved, the packed copy of the stored episodes (``state_dict``; a resume
                    holds the same payload while it refills the buffer); while the store grows, the old copy of
                    one field. Never at the same moment, and the runs of a ``--seeds`` group save (and grow) one
                    after another: the larger of the two is counted once per group, not per run
    episodic memory the registered memory's ``planned_nbytes`` at its largest (what ``semzoo memory-cost``
                    reports: SEM's table and V, EMC's index and curiosity, EMU's raw states and embedder ...)
    networks        the agent and mixer parameters, five copies (online, target, gradient, RMSprop state,
                    the acting copy)
    collector       the collected batch of ``n_envs`` padded episodes (two in flight when acting overlaps
                    learning) and a sampled batch of ``batch_size`` with its activations (an estimate)
    per run         ``RUN_OVERHEAD_BYTES`` for what a run owns besides (env, logger, allocator slack)

Where: everything is counted in host memory, but for a replay buffer kept on a CUDA device (``learner.replay_device``
'run' on a GPU run), which is counted against that device's free memory instead (``device_memory``), the plan saying
so; its growth's copy and the field a save gathers there before copying it to the host are counted there too, the
checkpoint's packed copy on the host. Networks and batches on a GPU are still counted on the host, an over-estimate
there.

Policy: a run (or a ``--seeds`` group of K runs, K times one run plus one copy) is refused (``check``: the CLI before it builds
anything, ``Trainer`` and ``MultiTrainer.create`` for runs started from Python) when its *worst case* exceeds
``MEMORY_MARGIN`` of the machine's available memory (``MemAvailable`` of /proc/meminfo, psutil elsewhere).
Refusing on the worst case, not the expected size, is the simple rule that cannot end in the kernel's
out-of-memory kill: a run that passes the plan cannot outgrow the machine whatever its episodes' lengths (a
replay buffer on a GPU: the same rule against the device's free memory).
It stays usable for big maps because the worst case is bounded by the steps a run can play: a short
27m_vs_30m run at the paper's 5000-episode buffer fits (its buffer can never hold more than it played),
while a 0.5M run, whose buffer could fill with 5000 episodes at the limit, is refused up front with the
numbers and the options (a smaller ``--buffer-size``, ``--replay-dtype float16``, a bigger machine).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from semzoo.config import TrainConfig
from semzoo.replay.buffer import (
    FIRST_SLOT,
    grown_slots,
    growth_transient_bytes,
    packed_nbytes,
    slot_bytes,
    worst_case_slots,
)
from semzoo.resolution import ResolvedRun
from semzoo.run.device import resolve_device
from semzoo.types import StateLayout

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup

MEMORY_MARGIN = 0.9
"""Share of the available memory a plan may use: the rest is left to the OS, page cache and other processes."""
RUN_OVERHEAD_BYTES = 64 * 2**20
"""What a run owns beyond the pieces counted (its env and wrappers, logger, tensor allocator slack): an estimate."""
OVERSHOOT_ITERATIONS = 2
"""Iterations a run may collect past ``steps`` (the last one, and one in flight when acting overlaps learning)."""
ACTIVATION_FLOATS_PER_AGENT_STEP = 8
"""Floats per (episode, step, agent) the update keeps for backward per hidden unit or action: an estimate."""
NETWORK_COPIES = 5
"""Online, target, gradient, RMSprop state and the acting copy of every parameter."""
HOST = "host"
"""``MemoryPlan.replay_device`` of a replay buffer in host memory."""
TYPICAL_LENGTH = {"smax:3m": 18, "smax:2s3z": 57, "smax:27m_vs_30m": 26}
"""Typical episode lengths of SMAX maps, from runs on them (docs/memory-plan.md, "The memory plan"); other envs
are expected at their limit. Only the expected size reads them: the worst case assumes the limit."""


@dataclass(frozen=True)
class EnvSizes:
    """What the plan needs of an env: agents, observation, state and action sizes, and the episode limit."""

    n_agents: int
    obs_dim: int
    state_dim: int
    n_actions: int
    episode_limit: int
    state_layout: StateLayout | None = None
    """The env's per-unit state layout, if it declares one (QPLEX's Qatten transformation reads it)."""

    @classmethod
    def of(cls, env: Any, episode_limit: int) -> EnvSizes:
        """The sizes of a CTDE env (``CTDEEnv`` or a vector of them): its own attributes, the run's episode limit."""
        return cls(n_agents=int(env.n_agents), obs_dim=int(env.obs_dim), state_dim=int(env.state_dim),
                   n_actions=int(env.n_actions), episode_limit=int(episode_limit),
                   state_layout=getattr(env, "state_layout", None))


class MemoryPlanRefused(ValueError):
    """A run, or a group of runs, whose worst case cannot fit this machine; the message is ``refusal``'s one line."""


@dataclass(frozen=True)
class ReplayBytes:
    """The replay buffer's bytes: its store (and ring index) expected and at its worst, and its copies."""

    expected: int
    worst: int
    worst_slots: int
    slot_bytes: int
    """Bytes of one stored slot (every field, in the store's types)."""
    growth_copy: int
    """The old copy of the largest field during the store's last growth, at the worst case."""
    checkpoint_copy: int
    """A checkpoint's packed copy of the stored episodes (``state_dict``), at the worst case."""
    growth_copy_expected: int
    checkpoint_copy_expected: int
    save_field_copy: int
    """The largest field of the stored slots, gathered where the store lives while a checkpoint is saved."""


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of one run's parts (``expected``/``worst`` where they differ) and of ``runs`` runs together.

    The replay buffer's copies (``ReplayBytes``) are counted once for the runs together: a checkpoint's packed copy
    and a growth's copy never coincide, and the runs of a group save and grow one after another.
    """

    runs: int
    replay_expected: int
    replay_worst: int
    replay_worst_slots: int
    slot_bytes: int
    table: int
    networks: int
    collector: int
    overhead: int
    growth_copy: int = 0
    """The replay buffer's store: the old copy of one field during its last growth (worst case)."""
    checkpoint_copy: int = 0
    """A checkpoint's packed copy of the stored episodes, in host memory (worst case)."""
    growth_copy_expected: int = 0
    checkpoint_copy_expected: int = 0
    save_field_copy: int = 0
    """One field of the stored slots gathered on the store's device by a save (counted there for a buffer on a GPU)."""
    updates_per_episode: float = 1.0
    """Gradient updates per collected episode: memory does not grow with it, the time of a run does (about in
    proportion to the learning share of its time), so the plan names it beside the bytes."""
    replay_device: str = HOST
    """Where the replay buffer is counted: ``HOST``, or the CUDA device that holds it (``cuda``, ``cuda:1``)."""
    memory_size: str = ""
    """The setting the episodic memory's bytes grow with, as a flag and its value (``--lagma-n-codes 256``); ''
    without memory."""

    @property
    def replay_on_device(self) -> bool:
        """Whether the replay buffer is counted against a device's memory, not the host's."""
        return self.replay_device != HOST

    @property
    def run_expected(self) -> int:
        """Host bytes of one run, expected."""
        replay = 0 if self.replay_on_device else self.replay_expected
        return replay + self.table + self.networks + self.collector + self.overhead

    @property
    def run_worst(self) -> int:
        """Host bytes of one run, worst case."""
        replay = 0 if self.replay_on_device else self.replay_worst
        return replay + self.table + self.networks + self.collector + self.overhead

    @property
    def copy_worst(self) -> int:
        """Host bytes of the replay buffer's largest copy, once for the runs: a checkpoint's packed copy, or (for a
        buffer on the host) a growth's copy where that is larger."""
        return self.checkpoint_copy if self.replay_on_device else max(self.checkpoint_copy, self.growth_copy)

    @property
    def copy_expected(self) -> int:
        """``copy_worst`` at the replay buffer's expected size."""
        if self.replay_on_device:
            return self.checkpoint_copy_expected
        return max(self.checkpoint_copy_expected, self.growth_copy_expected)

    @property
    def copy_name(self) -> str:
        """What ``copy_worst`` is: ``checkpoint copy`` or ``growth copy``."""
        return "growth copy" if self.copy_worst > self.checkpoint_copy else "checkpoint copy"

    @property
    def device_copy_worst(self) -> int:
        """Device bytes of the largest copy of a replay buffer kept there, once for the runs (0 on the host)."""
        return max(self.growth_copy, self.save_field_copy) if self.replay_on_device else 0

    @property
    def expected(self) -> int:
        return self.runs * self.run_expected + self.copy_expected

    @property
    def worst(self) -> int:
        return self.runs * self.run_worst + self.copy_worst

    @property
    def device_expected(self) -> int:
        """Device bytes of the runs' replay buffers, expected (0 when they are on the host)."""
        return self.runs * self.replay_expected + self.growth_copy_expected if self.replay_on_device else 0

    @property
    def device_worst(self) -> int:
        """Device bytes of the runs' replay buffers and their largest copy, worst case (0 when they are on the host)."""
        return self.runs * self.replay_worst + self.device_copy_worst if self.replay_on_device else 0

    def line(self, available: int | None, device_available: int | None = None) -> str:
        """One line: the parts, the totals and what the machine (and the replay buffer's device) has."""
        runs = f"{self.runs} runs x " if self.runs > 1 else ""
        where = f" on {self.replay_device}" if self.replay_on_device else ""
        text = (f"memory plan: {runs}(replay buffer{where} {gb(self.replay_expected)} expected, {gb(self.replay_worst)} "
                f"worst; episodic memory {gb(self.table)}; networks {gb(self.networks)}; collector "
                f"{gb(self.collector)}) + {self.copy_name} {gb(self.copy_worst)} = {gb(self.expected)} expected, "
                f"{gb(self.worst)} worst")
        text += " in host memory" if self.replay_on_device else ""
        text += f" of {gb(available)} available" if available is not None else ""
        if self.replay_on_device:
            text += (f"; {gb(self.device_expected)} expected, {gb(self.device_worst)} worst on {self.replay_device}")
            text += f" of {gb(device_available)} available" if device_available is not None else ""
        return text + f"; {self.updates_per_episode:g} {'update' if self.updates_per_episode == 1 else 'updates'}/episode"


def gb(n_bytes: float) -> str:
    """Bytes as GB (1e9) or MB, three significant figures."""
    return f"{n_bytes / 1e9:.3g} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.3g} MB"


def env_sizes(config: TrainConfig) -> EnvSizes:
    """The sizes of ``config.env`` read through its CTDE adapter (one env built and closed)."""
    from semzoo.envs.registry import make_env
    from semzoo.wrappers.ctde import CTDEEnv

    ctde = CTDEEnv(make_env(config.env, **config.env_args), episode_limit=config.episode_limit)
    try:
        return EnvSizes.of(ctde, config.episode_limit or ctde.episode_limit)
    finally:
        ctde.close()


def _store_sizes(used: int, max_t: int, worst: int) -> tuple[int, int]:
    """(slots the buffer's store has grown to once it holds ``used`` slots, the size before its last growth)."""
    before, slots = 0, min(worst, FIRST_SLOT + 2 * (max_t + 1))
    while slots < min(worst, FIRST_SLOT + used + 2 * (max_t + 1)):
        before, slots = slots, grown_slots(slots, slots, worst)  # what a growth of a full store gives
    return slots, before


def replay_bytes(sizes: EnvSizes, config: TrainConfig, *, key_words: int) -> ReplayBytes:
    """The run's replay buffer: its store expected and at its worst, and its copies (``ReplayBytes``)."""
    t = sizes.episode_limit
    fields = slot_bytes(n_agents=sizes.n_agents, obs_dim=sizes.obs_dim, state_dim=sizes.state_dim,
                        n_actions=sizes.n_actions, state_key_words=key_words, store_dtype=config.learner.replay_dtype)
    per_slot = sum(fields.values())
    capacity = config.learner.buffer_size
    structural = worst_case_slots(capacity, t)
    played = config.steps + OVERSHOOT_ITERATIONS * config.n_envs * t
    # Stored slots: each stored episode's steps plus one; no more episodes than capacity or steps played.
    most_used = min(capacity * (t + 1), played + min(capacity, played))
    # A growth happens only with under two episodes' room left, and grows by GROWTH: at most that much more.
    # Before a growth the store had under two episodes' room left, so fewer than most_used + 2 (t + 1) slots.
    before = min(structural, FIRST_SLOT + most_used + 2 * (t + 1))
    worst_slots = grown_slots(before, before, structural)
    typical = min(TYPICAL_LENGTH.get(config.env, t), t)
    expected_episodes = min(capacity, played // max(typical, 1))
    expected_used = min(capacity * (typical + 1), played + expected_episodes)
    expected_slots, expected_before = _store_sizes(expected_used, t, worst_slots)
    index = 2 * 8 * capacity  # offsets and lengths, int64

    def packed(slots: int, episodes: int) -> int:
        return packed_nbytes(n_agents=sizes.n_agents, obs_dim=sizes.obs_dim, state_dim=sizes.state_dim,
                             n_actions=sizes.n_actions, slots=slots, episodes=max(1, min(episodes, slots)))

    # A checkpoint packs the stored slots; fewer episodes in as many slots means more steps (of the larger size):
    # the worst case holds episodes at the limit.
    return ReplayBytes(expected=expected_slots * per_slot + index, worst=worst_slots * per_slot + index,
                       worst_slots=worst_slots, slot_bytes=per_slot,
                       growth_copy=growth_transient_bytes(fields, before),
                       checkpoint_copy=packed(most_used, most_used // (t + 1)),
                       growth_copy_expected=growth_transient_bytes(fields, expected_before),
                       checkpoint_copy_expected=packed(expected_used, expected_episodes),
                       save_field_copy=max(fields.values()) * most_used)


def network_bytes(sizes: EnvSizes, run: ResolvedRun) -> int:
    """Bytes of the agent's and mixer's parameters, ``NETWORK_COPIES`` times (built on the meta device: no memory)."""
    import torch

    from semzoo import algos
    from semzoo.agents.rnn import RNNAgent

    with torch.device("meta"):
        agent = RNNAgent.for_env(sizes, run.config.agent)  # type: ignore[arg-type]
        mixer = algos.make_run_mixer(run.config, run.algo, sizes)
    params = sum(p.numel() for m in (agent, mixer) for p in m.parameters())
    return NETWORK_COPIES * 4 * params


def collector_bytes(sizes: EnvSizes, config: TrainConfig) -> int:
    """The collected batches (float32, padded to the limit) and a sampled batch with its activations: an estimate."""
    t, a = sizes.episode_limit, sizes.n_agents
    padded_slot = 4 * (a * sizes.obs_dim + sizes.state_dim + a * sizes.n_actions + a + 3)
    in_flight = 1 if config.sequential else 2
    collected = in_flight * config.n_envs * (t + 1) * padded_slot
    batch = config.learner.batch_size
    activations = 4 * batch * (t + 1) * a * ACTIVATION_FLOATS_PER_AGENT_STEP * (config.agent.hidden_dim + sizes.n_actions)
    return collected + batch * (t + 1) * padded_slot + activations


def memory_size_setting(run: ResolvedRun) -> str:
    """The flag and value the run's episodic memory grows with (``Memory.size_setting``: ``--memory-capacity
    1,000,000``); '' without memory."""
    from semzoo.episodic.memory import memory_class

    config, algo = run.config, run.algo
    if not algo.has_memory:
        return ""
    key, flag = memory_class(algo.memory).size_setting
    section, _, name = key.rpartition(".")
    value = getattr(config.settings(section) if section else config, name)
    return f"{flag} {value:,}" if isinstance(value, int) else f"{flag} {value}"


def fit_to_env(run: ResolvedRun, sizes: EnvSizes) -> ResolvedRun:
    """``run`` with its memory's defaults fitted to the env's sizes (``Memory.fit_env``: LAGMA's latent size capped
    by a smaller state size), each change warned about in one line; ``run`` itself where nothing changes."""
    from semzoo.episodic.memory import memory_class

    if not run.algo.has_memory:
        return run
    fitted, note = memory_class(run.algo.memory).fit_env(memory_setup(run, sizes))
    if note is not None:
        warnings.warn(note, stacklevel=3)
    config = fitted.applied_to(run.config)
    return run if config is run.config else run.with_config(config)


def memory_setup(run: ResolvedRun, sizes: EnvSizes) -> MemorySetup:
    """The memory's part of ``run`` on an env of ``sizes`` (``MemorySetup.of``)."""
    from semzoo.episodic.setup import MemorySetup

    return MemorySetup.of(run.config, state_dim=sizes.state_dim, n_agents=sizes.n_agents, n_actions=sizes.n_actions,
                          obs_dim=sizes.obs_dim)


def table_bytes(sizes: EnvSizes, run: ResolvedRun) -> tuple[int, int]:
    """(bytes of the run's episodic memory at its largest, state-key words per slot), (0, 0) without memory."""
    from semzoo.episodic.memory import memory_class

    if not run.algo.has_memory:
        return 0, 0
    cls, setup = memory_class(run.algo.memory), memory_setup(run, sizes)  # each memory plans its own bytes
    cls.check_env(setup)  # a setting the env rules out is refused here, before a run is built
    return cls.planned_nbytes(setup), cls.planned_state_key_words(setup)


def replay_place(config: TrainConfig, device: torch.device | None = None) -> str:
    """Where a run of ``config`` on ``device`` (None: ``config.device`` resolved) has its replay buffer counted:
    ``HOST``, or the CUDA device that holds it (``learner.replay_device`` 'run' on a GPU run)."""
    if config.learner.replay_device != "run":
        return HOST
    if device is None:
        device = resolve_device(config.device)
    return str(device) if device.type == "cuda" else HOST


def plan(run: ResolvedRun, sizes: EnvSizes, *, runs: int = 1, device: torch.device | None = None) -> MemoryPlan:
    """The memory plan of ``runs`` runs of the resolved run ``run`` on ``device`` (None: its config's device; a
    ``--seeds`` group: K times one run)."""
    config = run.config
    table, key_words = table_bytes(sizes, run)
    replay = replay_bytes(sizes, config, key_words=key_words)
    return MemoryPlan(runs=runs, replay_expected=replay.expected, replay_worst=replay.worst,
                      replay_worst_slots=replay.worst_slots, slot_bytes=replay.slot_bytes, table=table,
                      networks=network_bytes(sizes, run), collector=collector_bytes(sizes, config),
                      overhead=RUN_OVERHEAD_BYTES, growth_copy=replay.growth_copy,
                      checkpoint_copy=replay.checkpoint_copy, growth_copy_expected=replay.growth_copy_expected,
                      checkpoint_copy_expected=replay.checkpoint_copy_expected, save_field_copy=replay.save_field_copy,
                      updates_per_episode=config.learner.updates_per_episode,
                      replay_device=replay_place(config, device), memory_size=memory_size_setting(run))


def available_memory() -> int | None:
    """Bytes the machine can still give (``MemAvailable`` of /proc/meminfo; psutil elsewhere); None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def device_memory(device: str) -> int | None:
    """Bytes free on the CUDA ``device`` (``torch.cuda.mem_get_info``); None when unknown."""
    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    except (RuntimeError, AssertionError, ValueError):  # no CUDA here, or the device cannot be queried
        return None
    return int(free)


def _plan_device(the_plan: MemoryPlan) -> torch.device:
    """The device ``plan`` needs to place the replay buffer where ``the_plan`` has it."""
    return torch.device(the_plan.replay_device if the_plan.replay_on_device else "cpu")


def _largest_buffer_that_fits(run: ResolvedRun, sizes: EnvSizes, fits: Callable[[MemoryPlan], bool], runs: int,
                              device: torch.device) -> int:
    """The largest ``--buffer-size`` whose plan of ``runs`` runs ``fits`` (0 when none does)."""
    config = run.config
    low, high = 0, config.learner.buffer_size
    while low < high:
        mid = (low + high + 1) // 2
        learner = dataclasses.replace(config.learner, buffer_size=mid, batch_size=min(mid, config.learner.batch_size))
        if fits(plan(run.replace(learner=learner), sizes, runs=runs, device=device)):
            low = mid
        else:
            high = mid - 1
    return low


def refusal(run: ResolvedRun, sizes: EnvSizes, the_plan: MemoryPlan, available: int | None,
            device_available: int | None = None) -> str | None:
    """The one-line reason to refuse ``the_plan`` (of ``run``) on a machine with ``available`` bytes (and
    ``device_available`` free on the device of a replay buffer kept there), or None when it fits; an unknown amount
    refuses nothing."""
    config = run.config
    r = the_plan
    host_budget = None if available is None else int(MEMORY_MARGIN * available)
    device_budget = (None if device_available is None or not r.replay_on_device
                     else int(MEMORY_MARGIN * device_available))

    def fits(p: MemoryPlan) -> bool:
        return ((host_budget is None or p.worst <= host_budget)
                and (device_budget is None or p.device_worst <= device_budget))

    if fits(r):
        return None
    device = _plan_device(r)
    on_host = host_budget is not None and r.worst > host_budget  # the host is short (said first when both are)

    def need(p: MemoryPlan) -> int:  # the bytes of the short side
        return p.worst if on_host else p.device_worst

    where = "" if on_host else f" on {r.replay_device}"
    buffer_where = f" on {r.replay_device}" if r.replay_on_device else ""
    per_run, copy = (r.run_worst, r.copy_worst) if on_host else (r.replay_worst, r.device_copy_worst)
    copy_name = (("a checkpoint's copy of the replay buffer" if r.copy_name == "checkpoint copy"
                  else "the replay buffer's copy while it grows") if on_host
                 else "the replay buffer's copy of a field while it grows or is saved")
    what = (f"{config.env} {config.algo} for {config.steps:,} steps needs up to {gb(per_run)} per run{where} "
            f"(replay buffer{buffer_where} worst case {gb(r.replay_worst)}: {config.learner.buffer_size:,} episodes, up "
            f"to {r.replay_worst_slots:,} steps of {r.slot_bytes:,} bytes; expected {gb(r.replay_expected)}), plus "
            f"{gb(copy)} at a time for {copy_name} = {gb(need(r))}")
    if on_host and r.memory_size and r.table > r.replay_worst:  # the memory, not the replay buffer, is what is big
        memory_flag = r.memory_size.partition(" ")[0]
        what = (f"{config.env} {config.algo} for {config.steps:,} steps needs up to {gb(per_run)} per run, most of it "
                f"the episodic memory: {gb(r.table)} at {r.memory_size} (replay buffer worst case "
                f"{gb(r.replay_worst)}), plus {gb(copy)} at a time for {copy_name} = {gb(need(r))}")
        if r.runs > 1:
            what = f"{r.runs} runs of {what}"
        if host_budget is not None and r.runs * r.table > host_budget:  # no replay setting can make it fit
            assert available is not None
            return (f"memory plan: {what}, but this machine has {gb(available)} available (the plan may use "
                    f"{MEMORY_MARGIN:.0%}): give a smaller {memory_flag}, or a machine with more memory")
    options = []
    # runs that fit both the host and the device, the copy counted once for them all
    limits = [max(0, budget - once) // max(each, 1)
              for budget, each, once in ((host_budget, r.run_worst, r.copy_worst),
                                         (device_budget, r.replay_worst, r.device_copy_worst))
              if budget is not None]
    fit = min(limits)
    if r.runs > 1:
        what = f"{r.runs} runs of {what}"
        options.append(f"{fit} runs fit (give --seeds 0-{fit - 1})" if fit > 0 else "not even one run fits")
    if r.runs == 1 or fit > 0:
        size = _largest_buffer_that_fits(run, sizes, fits, r.runs, device)
        if 0 < size < config.learner.buffer_size:
            options.append(f"--buffer-size {size}")
    if config.learner.replay_dtype == "float32":
        lossy = plan(run.replace(learner=dataclasses.replace(config.learner, replay_dtype="float16")),
                     sizes, runs=r.runs, device=device)
        options.append(f"--replay-dtype float16 (lossy, the learner reads rounded inputs: {gb(need(lossy))} worst{where}, "
                       f"{'fits' if fits(lossy) else 'still too big'})")
    if not on_host:
        host = plan(run.replace(learner=dataclasses.replace(config.learner, replay_device="host")),
                    sizes, runs=r.runs, device=device)
        options.append(f"--replay-device host ({gb(host.worst)} worst in host memory, "
                       f"{'fits' if fits(host) else 'still too big'})")
    options.append("a machine with more memory" if on_host else "a GPU with more memory")
    short = available if on_host else device_available  # the side whose budget was exceeded: known
    assert short is not None
    have = f"{'this machine' if on_host else r.replay_device} has {gb(short)} available"
    return f"memory plan: {what}, but {have} (the plan may use {MEMORY_MARGIN:.0%}): {'; '.join(options)}"


def check(run: ResolvedRun, sizes: EnvSizes, *, runs: int = 1,
          device: torch.device | None = None) -> tuple[MemoryPlan, int | None, int | None]:
    """The plan of ``runs`` runs of ``run`` on ``device`` (None: its config's device), the machine's available bytes
    and the free bytes of the replay buffer's device where it is kept on one (None when unknown or on the host).

    Raises ``MemoryPlanRefused`` (a ``ValueError``) with ``refusal``'s one line when the worst case cannot fit. The
    CLI calls it before it builds a run, to print the plan; ``Trainer`` calls it again once its env is built, so a
    run started from Python (``semzoo.train``, a sweep's worker, a resume) is refused the same way before its replay
    buffer can outgrow the machine.
    """
    the_plan = plan(run, sizes, runs=runs, device=device)
    available = available_memory()
    device_available = device_memory(the_plan.replay_device) if the_plan.replay_on_device else None
    reason = refusal(run, sizes, the_plan, available, device_available)
    if reason is not None:
        raise MemoryPlanRefused(reason)
    return the_plan, available, device_available


def peak_rss_bytes() -> int:
    """This process's peak resident memory (``ru_maxrss``), in bytes; 0 where unknown."""
    try:
        import resource
    except ImportError:
        return 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    import sys

    return int(rss if sys.platform == "darwin" else rss * 1024)


__all__ = ["HOST", "EnvSizes", "MemoryPlan", "MemoryPlanRefused", "ReplayBytes", "available_memory", "check", "device_memory",
           "env_sizes", "peak_rss_bytes", "plan", "refusal", "replay_place"]
