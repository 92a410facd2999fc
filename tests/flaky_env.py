"""Matrix games whose env raises once, part-way through a run: the sweep's retry test.

Imported by id ``pz:flaky_env:climbing`` / ``pz:flaky_env:penalty`` with ``tests/`` on the path
(Ray workers find it through ``PYTHONPATH``). Env arg ``marker``: a file path shared by every trial
of a sweep. The first env that takes ``fail_after`` steps while ``marker`` does not exist creates it,
writes its game and last reset seed there (which name the failing run), and raises
``FlakyEnvError``; once the marker exists, nothing fails again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from semzoo.envs.matrix_game_v0 import MatrixGameEnv

FAIL_AFTER_STEPS = 30


class FlakyEnvError(RuntimeError):
    """The one failure of a sweep's flaky env."""


class FlakyMatrixGame(MatrixGameEnv):
    def __init__(self, game: str, *, marker: str, fail_after: int = FAIL_AFTER_STEPS) -> None:
        super().__init__(game)
        self.marker = Path(marker)
        self.fail_after = fail_after
        self._steps = 0
        self._reset_seed: int | None = None

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        if seed is not None:
            self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> Any:
        self._steps += 1
        if self._steps == self.fail_after and self._claim_marker():
            raise FlakyEnvError(f"flaky env: injected failure after {self._steps} steps")
        return super().step(actions)

    def _claim_marker(self) -> bool:
        """Create the marker (atomically: one env in the whole sweep wins); False if it exists."""
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump({"game": self.game, "reset_seed": self._reset_seed}, f)
        return True


def climbing(*, marker: str, fail_after: int = FAIL_AFTER_STEPS) -> FlakyMatrixGame:
    return FlakyMatrixGame("climbing", marker=marker, fail_after=fail_after)


def penalty(*, marker: str, fail_after: int = FAIL_AFTER_STEPS) -> FlakyMatrixGame:
    return FlakyMatrixGame("penalty", marker=marker, fail_after=fail_after)
