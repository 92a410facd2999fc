"""Which torch device a run uses."""

from __future__ import annotations

import torch

from semzoo.config import DEVICE_PATTERN


def resolve_device(name: str) -> torch.device:
    """'auto' -> the first GPU when one is present, else the CPU; ValueError for a device this machine lacks."""
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
