"""What code and machine made a run: ``provenance.json`` in its run directory (layout in ``semzoo.runfiles``).

One record per session: the first when the run starts, one more each time it is resumed, oldest first. A record
names semzoo's version, the git commit it was imported from and whether that checkout had uncommitted changes to
tracked files, the versions of the packages a run's numbers depend on, Python, the run's device and the CPU.
Where git is absent, or semzoo was installed from a wheel (its files are not tracked by a git checkout), the commit
is ``"unknown"`` and ``dirty`` is null; a package that is not installed has version null.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from semzoo.run.checkpoint import write_atomic
from semzoo.runfiles import PROVENANCE_FILE, UNKNOWN_COMMIT, read_provenance
from semzoo.version import __version__

PACKAGES = ("torch", "jax", "jaxlib", "jaxmarl", "numpy", "pettingzoo", "gymnasium")
"""The installed packages whose versions a record names (importlib.metadata: none of them is imported for it)."""
GIT_TIMEOUT_S = 10
"""Seconds a git command may take before the commit counts as unknown (a hung network filesystem)."""


def _git(folder: Path, *args: str) -> str | None:
    """``git -C folder args`` stdout, or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def code_version(package_dir: Path | None = None) -> dict[str, Any]:
    """semzoo's version, commit and dirtiness, and the folder it was imported from (``package_dir``: semzoo's).

    The commit is read only where semzoo's own ``__init__.py`` is tracked by the enclosing checkout: a wheel
    installed into a virtual environment inside some other repository is not that repository's code.
    """
    folder = Path(__file__).resolve().parents[1] if package_dir is None else package_dir
    commit, dirty = UNKNOWN_COMMIT, None
    if _git(folder, "ls-files", "--error-unmatch", "--", "__init__.py") is not None:
        head = _git(folder, "rev-parse", "HEAD")
        status = _git(folder, "status", "--porcelain", "--untracked-files=no")
        if head is not None and status is not None:
            commit, dirty = head.strip(), bool(status.strip())
    return {"version": __version__, "commit": commit, "dirty": dirty, "source": str(folder)}


def package_versions() -> dict[str, str | None]:
    """``PACKAGES`` -> installed version (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_name(device: torch.device) -> str:
    """The run's device, with the GPU's model for a CUDA device: ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if device.type != "cuda":
        return str(device)
    index = torch.cuda.current_device() if device.index is None else device.index
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def session_record(device: torch.device, env_steps: int) -> dict[str, Any]:
    """This process's record: when, from which env step, semzoo's code, packages, Python, device and CPU."""
    return {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "env_steps": env_steps,
        "semzoo": code_version(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device_name(device),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }


def write_provenance(run_dir: Path, device: torch.device, *, resumed: bool, env_steps: int) -> dict[str, Any]:
    """Write ``provenance.json``: a new run's first record, or a resumed run's records with this session's added
    (a resumed run without a readable file, made before semzoo kept one, starts its list here). Returns it."""
    earlier = read_provenance(run_dir) if resumed else None
    sessions = [*(earlier or {}).get("sessions", []), session_record(device, env_steps)]
    data = {"sessions": sessions}
    write_atomic(run_dir / PROVENANCE_FILE, json.dumps(data, indent=2).encode())
    return data


__all__ = ["PACKAGES", "code_version", "cpu_name", "device_name", "package_versions", "session_record",
           "write_provenance"]
