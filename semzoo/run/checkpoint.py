"""Atomic, checksummed, complete checkpoints of a run.

A checkpoint file is one header line, then the payload:

    SEMZOO-CKPT <format> <sha256 of payload, hex> <payload bytes>\\n<payload>

The payload is ``torch.save`` of a dict of tensors, plain Python values and numpy arrays
(stored as tagged tensors), loaded back with ``weights_only=True``: reading a checkpoint never
runs code. A file is written to a temporary name in the same folder, flushed, fsync'ed,
renamed over its final name and the folder fsync'ed, so a reader sees the old file or the new
one, never a partial one. A file whose length or checksum does not match is corrupt:
``CheckpointManager.load_latest`` then falls back to the previous checkpoint with a warning.

A checkpoint with a full replay buffer runs to gigabytes, so neither side holds the file in memory: the
payload streams into the file through the checksum (the header's byte count is zero-padded to a fixed width,
written last), and a reader checks the checksum in chunks, then loads from the file past the header. Saving
or loading takes the payload's own tensors and no copy of the file's bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import numpy as np
import torch

MAGIC = b"SEMZOO-CKPT"
FORMAT_VERSION = 1
CHECKPOINT_DIR = "checkpoints"
FILE_PATTERN = re.compile(r"^step_(\d{12})\.ckpt$")
TMP_SUFFIX = ".tmp"
CORRUPT_SUFFIX = ".corrupt"
KEEP_LAST = 2
MAX_HEADER_BYTES = 256
SIZE_DIGITS = 20
"""Width of the header's zero-padded byte count: the header is written before the payload's size is known."""
_CHUNK = 1 << 24
_NDARRAY_TAG = "__ndarray__"


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt, or belongs to another run."""


class CheckpointWarning(UserWarning):
    """A corrupt checkpoint was skipped in favour of an earlier one."""


# ----- payload encoding: numpy arrays as tagged tensors so torch.load(weights_only=True) reads them ---------------


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)  # shared, not copied: torch.save reads it while the caller waits
        return {_NDARRAY_TAG: torch.from_numpy(array if array.flags.writeable else array.copy()),
                "dtype": array.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        encoded = [_encode(item) for item in value]
        return encoded if isinstance(value, list) else tuple(encoded)
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if _NDARRAY_TAG in value:
            return value[_NDARRAY_TAG].numpy().astype(np.dtype(value["dtype"]), copy=False)
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        decoded = [_decode(item) for item in value]
        return decoded if isinstance(value, list) else tuple(decoded)
    return value


# ----- one file ---------------------------------------------------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic_with(path: str | Path, fill: Callable[[BinaryIO], None]) -> int:
    """Let ``fill`` write ``path`` so that a crash leaves either the old file or the complete new one; returns
    the file's size in bytes."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    with open(tmp, "wb") as f:
        fill(f)
        f.flush()
        os.fsync(f.fileno())
        size = f.seek(0, os.SEEK_END)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return size


def write_atomic(path: str | Path, *chunks: bytes | memoryview) -> None:
    """Write ``chunks`` to ``path`` so that a crash leaves either the old file or the complete new one."""
    def fill(f: BinaryIO) -> None:
        for chunk in chunks:
            f.write(chunk)

    _write_atomic_with(path, fill)


class _HashingSink:
    """Where ``torch.save`` writes: through to the file, hashing and counting what passes."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


class _PastHeader(io.RawIOBase):
    """A read-only view of an open file from ``start`` on, so ``torch.load`` reads the payload in place."""

    def __init__(self, file: io.BufferedReader, start: int) -> None:
        super().__init__()
        self.file, self.start = file, start
        file.seek(start)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self.file.readinto(buffer)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.file.seek(offset + self.start if whence == os.SEEK_SET else offset, whence) - self.start

    def tell(self) -> int:
        return self.file.tell() - self.start


def _header(checksum: bytes, size: int) -> bytes:
    return b"%s %d %s %0*d\n" % (MAGIC, FORMAT_VERSION, checksum, SIZE_DIGITS, size)


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> int:
    """Write ``payload`` atomically with its checksum, streamed (no copy of the file in memory); returns the file
    size in bytes."""
    def fill(f: BinaryIO) -> None:
        placeholder = _header(b"0" * 64, 0)
        f.write(placeholder)
        sink = _HashingSink(f)
        torch.save(_encode(payload), cast(IO[bytes], sink))
        header = _header(sink.sha256.hexdigest().encode(), sink.size)
        assert len(header) == len(placeholder), "a payload of over 10^20 bytes"
        f.seek(0)
        f.write(header)

    return _write_atomic_with(path, fill)


def _parse_header(line: bytes) -> tuple[int, bytes, int] | None:
    """(format, sha256 hex, payload bytes) of a header line ``MAGIC format sha256 bytes``; None if it is not one."""
    parts = line.split(b" ")
    if len(parts) != 4 or parts[0] != MAGIC or not parts[1].isdigit() or not parts[3].isdigit():
        return None
    return int(parts[1]), parts[2], int(parts[3])


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and verify one checkpoint; raises CheckpointError if it is truncated, altered or not a checkpoint."""
    path = Path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below, after the errors it can raise are named
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror}") from None
    with f:
        head = f.read(MAX_HEADER_BYTES)
        newline = head.find(b"\n")
        header = _parse_header(head[:newline]) if newline > 0 else None
        if header is None:
            raise CheckpointError(f"checkpoint {path} is corrupt: it does not start with a semzoo checkpoint header")
        version, checksum, size = header
        if version != FORMAT_VERSION:
            raise CheckpointError(f"checkpoint {path} has format {version}, this semzoo reads format {FORMAT_VERSION}")
        start = newline + 1
        f.seek(start)
        sha256 = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            sha256.update(chunk)
        if f.tell() - start != size or sha256.hexdigest().encode() != checksum:
            raise CheckpointError(f"checkpoint {path} is corrupt: its checksum does not match (partial or altered file)")
        return _decode(torch.load(cast(IO[bytes], _PastHeader(f, start)), map_location="cpu", weights_only=True))


# ----- the checkpoints of a run -----------------------------------------------------------------------------------


class CheckpointManager:
    """The ``checkpoints/`` folder of a run directory: ``step_<env steps>.ckpt``, the last ``keep`` kept."""

    def __init__(self, run_dir: str | Path, *, keep: int = KEEP_LAST) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: expected at least one checkpoint to keep")
        self.folder = Path(run_dir) / CHECKPOINT_DIR
        self.keep = keep

    def path_for(self, env_steps: int) -> Path:
        return self.folder / f"step_{env_steps:012d}.ckpt"

    def paths(self) -> list[Path]:
        """Complete-named checkpoint files, newest (most env steps) first."""
        if not self.folder.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if (m := FILE_PATTERN.match(p.name))]
        return [p for _, p in sorted(found, reverse=True)]

    def save(self, payload: dict[str, Any], env_steps: int) -> tuple[Path, int]:
        """Write the checkpoint for ``env_steps`` and drop all but the newest ``keep``; returns (path, bytes)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path_for(env_steps)
        size = save_checkpoint(path, payload)
        for old in self.paths()[self.keep:]:
            old.unlink(missing_ok=True)
        return path, size

    def remove_all(self) -> None:
        """Remove every checkpoint of the run (and the folder once empty); best.ckpt lives outside it."""
        for path in self.paths():
            path.unlink(missing_ok=True)
        self.clean_temporaries()
        with contextlib.suppress(OSError):
            self.folder.rmdir()

    def clean_temporaries(self) -> None:
        """Remove temporary files left by a writer that was killed mid-write."""
        if self.folder.is_dir():
            for p in self.folder.glob(f".*{TMP_SUFFIX}"):
                p.unlink(missing_ok=True)

    def load_latest(self, *, quarantine: bool = False) -> tuple[Path, dict[str, Any]] | None:
        """The newest checkpoint that verifies, or None when there is none at all.

        A corrupt newer file is skipped with a ``CheckpointWarning`` (and renamed ``*.corrupt`` when
        ``quarantine``); if every file is corrupt, raises CheckpointError.
        """
        paths = self.paths()
        if not paths:
            return None
        errors = []
        for path in paths:
            try:
                payload = load_checkpoint(path)
            except CheckpointError as err:
                errors.append(str(err))
                continue
            for message in errors:
                warnings.warn(f"{message}; using the earlier {path.name}", CheckpointWarning, stacklevel=2)
            if quarantine:
                for bad in paths[: len(errors)]:
                    bad.replace(bad.with_name(bad.name + CORRUPT_SUFFIX))
            return path, payload
        raise CheckpointError(f"{errors[0]}, and no earlier valid checkpoint exists in {self.folder}")


__all__ = [
    "CHECKPOINT_DIR",
    "KEEP_LAST",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointWarning",
    "load_checkpoint",
    "save_checkpoint",
    "write_atomic",
]
