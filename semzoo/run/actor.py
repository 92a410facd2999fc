"""The actor process: overlap mode's collector in a process of its own, so acting and learning use two cores.

Both sides of the overlap spend most of their time in Python (env stepping, the agent's small forward,
the learner's dispatch), so a collecting *thread* mostly takes turns with the learner for the GIL. The
actor is a child process, a fresh interpreter started with ``subprocess`` (never a fork: JAX is not
fork-safe; and unlike multiprocessing's spawn it does not re-import the parent's ``__main__``), that builds its own envs with
``make_vec_env(config)`` and its own ``RNNAgent``, and serves one request at a time over a pipe:

    (seed, epsilon, acting agent's parameters, acting generator's state)
        -> (the episode batch, its RolloutStats, the generator's new state, seconds it took)

It runs exactly the thread collector's ``EpisodeRunner.run`` with the same parameters, seed and random
state, so a run gives the same numbers bit for bit; the trainer keeps the acting agent and generator
(and checkpoints them) as with the thread collector. Everything crosses the pipe as numpy arrays (plain pickles, no
shared-memory file descriptors). An exception raised in the child is raised in the parent as the same
type with the child's message (its traceback as a note); a child that dies is a RuntimeError.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
import warnings
from multiprocessing.connection import Connection
from typing import Any

import torch

from semzoo.run.runner import RolloutStats
from semzoo.types import EpisodeBatch

STARTUP_TIMEOUT_S = 600.0
"""How long the parent waits for the child to import, build its envs and play a throwaway batch (JAX compiles)."""
CLOSE_TIMEOUT_S = 5.0


class ActorStartError(RuntimeError):
    """The actor process could not build its envs or agent (the trainer then collects on a thread)."""


def start_or_fall_back(actor: ActorProcess) -> ActorProcess | None:
    """``actor`` started (seconds: its imports, envs and, for SMAX, a JAX compile), or None to collect on a thread.

    An actor that cannot build the run's envs or agent (an env registered with ``register_env`` in code a new
    process does not import, e.g. a script's own module) falls back to the thread with a warning; the run is the
    same either way.
    """
    try:
        actor.start()
    except ActorStartError as err:
        warnings.warn(f"{err}; collecting on a thread instead (the same run, but acting and learning then share "
                      f"one core: the GIL). Register the env in a plugin module (--plugin / SEMZOO_PLUGINS) so "
                      f"new processes know it", stacklevel=3)  # the trainer's loop, as the trainer warned it
        return None
    return actor


class ActorProcess:
    """A child process that collects episode batches for the trainer, one request at a time.

    ``start()`` blocks until the child has built its envs and agent (``startup_s`` says how long that
    took); ``submit`` sends a request and ``result`` waits for its answer. ``close()`` ends the child
    (terminating it if a request is in flight) and is safe to call twice.
    """

    def __init__(self, config_dict: dict[str, Any], *, device: str, episode_limit: int) -> None:
        self._config_dict, self._device, self._episode_limit = config_dict, device, episode_limit
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._in_flight = False
        self.startup_s = 0.0

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        started = time.perf_counter()
        # A fresh interpreter that imports only semzoo (not the parent's __main__, as multiprocessing's spawn
        # would: an unguarded script that trains would train again in the child), on the parent's sys.path.
        code = (f"import sys; sys.path[:] = {sys.path!r}; from semzoo.run.actor import _child_main; "
                f"_child_main({child_sock.fileno()})")
        try:
            process = subprocess.Popen([sys.executable, "-c", code], pass_fds=(child_sock.fileno(),))
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()  # the parent's copy: the child's end then closes (EOF here) when the child dies
        self._process, self._conn = process, Connection(parent_sock.detach())
        try:
            # A child that died already (EPIPE here) is reported by the receive below, with its exit code.
            env_factory, unshippable = _shippable_env_factory(self._config_dict["env"])
            with contextlib.suppress(OSError):
                self._conn.send((self._config_dict, self._device, self._episode_limit, env_factory))
            if not self._conn.poll(STARTUP_TIMEOUT_S):
                raise ActorStartError(f"the actor process did not start within {STARTUP_TIMEOUT_S:.0f} s")
            try:
                kind, payload = self._receive()
            except RuntimeError as err:  # died before it could say why (e.g. semzoo does not import there)
                raise ActorStartError(str(err)) from None
            if kind == "error":
                raise ActorStartError(f"the actor process could not build its envs and agent: {_describe(payload)}"
                                      + (f" ({unshippable})" if unshippable else ""))
        except BaseException:
            self.close()
            raise
        self.startup_s = time.perf_counter() - started

    def submit(self, seed: int, epsilon: float, agent_state: dict[str, torch.Tensor],
               generator_state: torch.Tensor) -> None:
        """Ask for one batch by an agent with ``agent_state``, drawing from a generator in ``generator_state``."""
        assert self._conn is not None and not self._in_flight
        params = {k: v.detach().cpu().numpy() for k, v in agent_state.items()}
        self._conn.send((seed, epsilon, params, generator_state.numpy()))
        self._in_flight = True

    def result(self) -> tuple[EpisodeBatch, RolloutStats, torch.Tensor, float]:
        """The batch asked for, its stats, the generator's state after it and the child's seconds; raises its error."""
        assert self._in_flight
        kind, payload = self._receive()
        self._in_flight = False
        if kind == "error":
            raise _rebuild(payload)
        fields, stats, generator_state, seconds = payload
        batch = EpisodeBatch(**{k: torch.from_numpy(v) for k, v in fields.items()})
        return batch, stats, torch.from_numpy(generator_state), seconds

    def _receive(self) -> tuple[str, Any]:
        assert self._conn is not None
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            process = self._process
            code = None
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = process.wait(CLOSE_TIMEOUT_S)
            raise RuntimeError(f"the actor process (overlap mode's collector) died (exit code {code}); set "
                               "sequential=True (--sequential) to train without it") from None

    def close(self) -> None:
        conn, process = self._conn, self._process
        self._conn, self._process = None, None
        if conn is not None:
            try:
                if not self._in_flight:
                    conn.send(None)  # asks the child to return
            except OSError:
                pass
            conn.close()
        if process is not None:
            try:
                process.wait(0.001 if self._in_flight else CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(CLOSE_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._in_flight = False


def _child_main(fd: int) -> None:
    """The child: build envs and agent, say so, then answer requests until ``None`` or the parent goes away."""
    # Ctrl-C (and a scheduler's SIGTERM) reaches the whole process group: the parent decides, and its run
    # checkpoints and stops (semzoo.run.stopping); the child returns when the parent closes the pipe or dies.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    torch.set_num_threads(1)
    conn = Connection(fd)
    try:
        config_dict, device_name, episode_limit, env_factory = conn.recv()
        from semzoo.agents.rnn import RNNAgent
        from semzoo.config import TrainConfig
        from semzoo.envs.registry import make_vec_env, register_env, registered_factory
        from semzoo.plugins import load_plugins
        from semzoo.run.device import share_gpu_with_jax
        from semzoo.run.runner import EpisodeRunner

        load_plugins()  # a plugin that registers the env wins over the parent's copy of its factory
        if env_factory is not None and registered_factory(config_dict["env"]) is None:
            register_env(config_dict["env"], pickle.loads(env_factory))
        config = TrainConfig.from_dict(config_dict)
        device = torch.device(device_name)
        share_gpu_with_jax(device)  # before the envs: JAX reads it when its GPU backend starts
        env = make_vec_env(config)
        agent = RNNAgent.for_env(env, config.agent).to(device).requires_grad_(False)
        runner = EpisodeRunner(env, agent, device=device, episode_limit=episode_limit)
        generator = torch.Generator()
        # One throwaway batch before saying ready: JAX compiles SMAX's step here, so startup_s holds the
        # whole fixed cost. Every request resets the envs with its own seed, so it changes no result.
        runner.run(epsilon=1.0, seed=0, generator=torch.Generator().manual_seed(0))
    except (EOFError, OSError):
        return  # the parent went away
    except BaseException as err:  # reported to the parent, which falls back to a thread
        conn.send(("error", _pack(err)))
        conn.close()
        return
    conn.send(("ready", os.getpid()))
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            if request is None:
                return
            seed, epsilon, params, generator_state = request
            try:
                started = time.perf_counter()
                agent.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
                generator.set_state(torch.from_numpy(generator_state))
                batch, stats = runner.run(epsilon=epsilon, seed=seed, generator=generator)
                fields = {name: value.numpy() for name, value in batch.tensors().items()}
                answer: tuple[str, Any] = ("ok", (fields, stats, generator.get_state().numpy(),
                                                  time.perf_counter() - started))
            except Exception as err:  # raised again in the parent
                answer = ("error", _pack(err))
            conn.send(answer)
    finally:
        env.close()
        conn.close()


def _shippable_env_factory(env_id: str) -> tuple[bytes | None, str | None]:
    """The pickled factory of an env registered in this process, for the child to register too; else why not.

    A factory pickles by reference (a module's function, a class, ``functools.partial`` of one), so the child
    imports it; a lambda or a function of a script's ``__main__`` (which the child does not run) cannot travel.
    Returns (None, None) for semzoo's own ids.
    """
    from semzoo.envs.registry import registered_factory

    factory = registered_factory(env_id)
    if factory is None:
        return None, None
    why = (f"env {env_id!r} was registered with a factory a new process cannot import ({factory!r}); register a "
           "function of an importable module or functools.partial of one, or name its module in SEMZOO_PLUGINS")
    target = getattr(factory, "func", factory)  # functools.partial: the function it wraps
    if getattr(target, "__module__", None) == "__main__":
        return None, why
    try:
        return pickle.dumps(factory), None
    except Exception:  # a lambda, a closure, a local function
        return None, why


def _pack(err: BaseException) -> dict[str, Any]:
    """An exception for the pipe: pickled where it can be, with its type, message and traceback as text."""
    try:
        pickled: bytes | None = pickle.dumps(err)
    except Exception:  # an exception that does not pickle travels as text
        pickled = None
    return {"pickled": pickled, "type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err),
            "traceback": "".join(traceback.format_exception(err))}


def _rebuild(packed: dict[str, Any]) -> BaseException:
    err: BaseException | None = None
    if packed["pickled"] is not None:
        try:
            err = pickle.loads(packed["pickled"])
        except Exception:  # a type the parent cannot import
            err = None
    if err is None:
        err = RuntimeError(_describe(packed))
    err.add_note(f"raised in the actor process (overlap mode's collector):\n{packed['traceback'].rstrip()}")
    return err


def _describe(packed: dict[str, Any]) -> str:
    return f"{packed['type']}: {packed['message']}"


__all__ = ["ActorProcess", "ActorStartError"]
