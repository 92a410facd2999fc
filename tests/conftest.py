"""Shared fixtures: small, fast configurations."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # tests run in parallel on 2 cores; one thread each avoids oversubscription


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"
