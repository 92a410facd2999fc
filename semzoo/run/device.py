"""Which torch device a run uses."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """'auto' -> the first GPU when one is present, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r}: no CUDA GPU is visible; use --device cpu or --device auto")
    return device
