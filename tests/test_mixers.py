"""The Mixer contract, for the mixer of every row of the algorithm table (and so every registered mixer)."""

from __future__ import annotations

import pytest
import torch

from semzoo.algos import algorithm_ids, parse_algorithm
from semzoo.config import MixerConfig
from semzoo.mixers.base import make_mixer

ROWS = [algo for algo in algorithm_ids() if parse_algorithm(algo).memory == "none"]

B, T, A, S, U = 4, 5, 3, 7, 6


def build(algo: str):
    """The mixer of algorithm row ``algo`` (cw-qmix and ow-qmix mix with QMIX's mixer)."""
    torch.manual_seed(0)
    return make_mixer(parse_algorithm(algo).mixer, n_agents=A, state_dim=S, n_actions=U, config=MixerConfig())


def extras():
    actions = torch.randint(0, U, (B, T, A))
    return {"actions_onehot": torch.nn.functional.one_hot(actions, U).float(), "max_qs": torch.randn(B, T, A) + 2.0}


@pytest.mark.parametrize("name", ROWS)
def test_mixer_output_shape(name):
    out = build(name)(torch.randn(B, T, A), torch.randn(B, T, S), **extras())
    assert out.shape == (B, T, 1)


@pytest.mark.parametrize("name", ROWS)
def test_mixer_wrong_agent_shape_names_both_shapes(name):
    with pytest.raises(ValueError, match=r"\(4, 5, 2\).*\[B, T, 3\]"):
        build(name)(torch.randn(B, T, 2), torch.randn(B, T, S), **extras())


@pytest.mark.parametrize("name", ROWS)
def test_mixer_wrong_state_shape_names_both_shapes(name):
    with pytest.raises(ValueError, match=r"\(4, 5, 9\).*\(4, 5, 7\)"):
        build(name)(torch.randn(B, T, A), torch.randn(B, T, 9), **extras())


@pytest.mark.parametrize("name", ROWS)
@pytest.mark.parametrize("scale", [0.0, 1e4])
def test_mixer_is_finite_on_zero_and_extreme_inputs(name, scale):
    qs = torch.full((B, T, A), scale)
    state = torch.full((B, T, S), scale)
    ex = extras()
    ex["max_qs"] = qs + 1.0
    assert torch.isfinite(build(name)(qs, state, **ex)).all()


def test_unknown_mixer_lists_the_names():
    with pytest.raises(ValueError, match="vdn"):
        make_mixer("nope", n_agents=A, state_dim=S, n_actions=U, config=MixerConfig())


def test_vdn_output_equals_the_sum():
    qs = torch.randn(B, T, A)
    assert torch.allclose(build("vdn")(qs, torch.randn(B, T, S)).squeeze(-1), qs.sum(-1))


def test_qmix_is_monotonic_in_every_agent_q():
    mixer = build("qmix")
    for seed in range(5):
        torch.manual_seed(seed)
        qs = (torch.randn(B, T, A) * 5).requires_grad_(True)
        mixer(qs, torch.randn(B, T, S) * 3).sum().backward()
        assert (qs.grad >= 0).all()
