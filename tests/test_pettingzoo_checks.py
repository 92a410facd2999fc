"""PettingZoo's own checkers pass on every env id family semzoo builds, in every observation format.

``parallel_seed_test`` samples actions without the mask, and so does ``parallel_api_test`` on box observations
(it reads a mask from dict observations only): SMAX and SMAC, which refuse an unavailable action as SMAC does,
play them with ``unavailable_action="stop"``. MPE has one observation format (Box) and no masks. The SMAC wrapper
(``smac:`` ids, StarCraft II) runs the same checkers against a fake backend in tests/test_smac_wrapper.py.
"""

from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from semzoo.envs.registry import make_env

API_CYCLES = 100
"""Steps of ``parallel_api_test``: a whole SMAX episode against a random policy (its limit is 100)."""


def smax(map_name: str, obs_format: str, **options: str):
    name = "".join(f"-{key}={value}" for key, value in options.items())
    return pytest.param(f"smax:{map_name}", {"obs_format": obs_format, "unavailable_action": "stop", **options},
                        id=f"smax:{map_name}-{obs_format}{name}", marks=pytest.mark.smax)


CASES = [
    pytest.param("matrix:climbing", {"obs_format": "dict"}, id="matrix:climbing-dict"),
    pytest.param("matrix:climbing", {"obs_format": "box"}, id="matrix:climbing-box"),
    pytest.param("matrix:two_step", {"obs_format": "box"}, id="matrix:two_step-box"),
    smax("3m", "dict"),
    smax("3m", "box"),
    smax("2s3z", "dict"),
    smax("2s3z", "box"),
    smax("2s3z", "dict", profile="smac"),  # SMAC's features, state with last actions, attacks within 6
    smax("2s3z", "box", profile="smac"),
    pytest.param("pz:mpe2.simple_spread_v3:parallel_env", {}, id="mpe:simple_spread-box"),
]


def make(env_id: str, env_args: dict):
    if env_id.startswith("smax:"):
        pytest.importorskip("jaxmarl")
    if env_id.startswith("pz:mpe2"):
        pytest.importorskip("mpe2")
    return make_env(env_id, **env_args)


@pytest.mark.parametrize(("env_id", "env_args"), CASES)
def test_pettingzoo_parallel_api_test_passes(env_id, env_args):
    parallel_api_test(make(env_id, env_args), num_cycles=API_CYCLES)


@pytest.mark.parametrize(("env_id", "env_args"), CASES)
def test_pettingzoo_parallel_seed_test_passes(env_id, env_args):
    parallel_seed_test(lambda: make(env_id, env_args))
