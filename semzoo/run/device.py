"""Which torch device a run uses, and how JAX (SMAX's engine) shares a GPU with it."""

from __future__ import annotations

import os

import torch

from semzoo.config import DEVICE_PATTERN

JAX_PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
"""JAX's switch for taking 75 % of a GPU's memory when its GPU backend starts (read then, not at import)."""


def share_gpu_with_jax(device: torch.device) -> None:
    """On a CUDA run, JAX allocates GPU memory as it needs it instead of taking 75 % up front (torch needs the rest).

    Sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` unless the user set it (or ``XLA_PYTHON_CLIENT_MEM_FRACTION`` /
    ``XLA_CLIENT_MEM_FRACTION``, which then decide); JAX reads it when its GPU backend starts, at the first SMAX
    env. Nothing changes on the CPU, or where JAX runs on the CPU (``JAX_PLATFORMS=cpu``).
    """
    fractions = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")
    if device.type == "cuda" and not any(name in os.environ for name in fractions):
        os.environ.setdefault(JAX_PREALLOCATE, "false")


def resolve_device(name: str) -> torch.device:
    """'auto' -> the first GPU when one is present, else the CPU; ValueError for a device this machine lacks.

    A CUDA device also keeps JAX from taking the GPU's memory up front (``share_gpu_with_jax``).
    """
    device = _resolve(name)
    share_gpu_with_jax(device)
    return device


def replay_device(setting: str, device: torch.device) -> torch.device:
    """Where a run on ``device`` keeps its replay buffer (``learner.replay_device``): 'run' there, 'host' the CPU."""
    return device if setting == "run" else torch.device("cpu")


def _resolve(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not DEVICE_PATTERN.fullmatch(name):
        raise ValueError(f"device {name!r}: expected 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: no CUDA GPU is visible; use --device cpu or --device auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f"device {name!r}: {count} CUDA GPU(s) visible, cuda:0 to cuda:{count - 1}; "
                             "pick one of them or --device auto")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: no Apple MPS device is available; use --device cpu or --device auto")
    return device
