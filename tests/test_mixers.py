"""The Mixer contract, for the mixer of every row of the algorithm table (and so every registered mixer)."""

from __future__ import annotations

import pytest
import torch

from semzoo.algos import algorithm_ids, parse_algorithm
from semzoo.mixers.base import Mixer, make_mixer, register_mixer

ROWS = [algo for algo in algorithm_ids() if parse_algorithm(algo).memory == "none"]

B, T, A, S, U = 4, 5, 3, 7, 6


def build(algo: str):
    """The mixer of algorithm row ``algo`` (cw-qmix and ow-qmix mix with QMIX's mixer)."""
    torch.manual_seed(0)
    return make_mixer(parse_algorithm(algo).mixer, n_agents=A, state_dim=S, n_actions=U)


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
        make_mixer("nope", n_agents=A, state_dim=S, n_actions=U)


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


class _SumMixer(Mixer):
    """VDN with a configurable mistake in what mix() returns."""

    returns = "ok"

    def mix(self, agent_qs_BTA, state_BTS, **extra):
        q_BT1 = agent_qs_BTA.sum(dim=-1, keepdim=True)
        return {"ok": q_BT1, "no_keepdim": q_BT1[..., 0], "two": q_BT1.expand(-1, -1, 2),
                "int": q_BT1.long(), "numpy": q_BT1.detach().numpy()}[self.returns]


@pytest.mark.parametrize(("returns", "got"), [
    ("no_keepdim", f"a tensor of shape {(B, T)} and dtype torch.float32"),
    ("two", f"a tensor of shape {(B, T, 2)} and dtype torch.float32"),
    ("int", f"a tensor of shape {(B, T, 1)} and dtype torch.int64"),
    ("numpy", "a ndarray"),
])
def test_a_mixer_whose_mix_breaks_the_output_contract_is_one_error_naming_it(fresh_registries, returns, got):
    mixer_class = type("BrokenMixer", (_SumMixer,), {"returns": returns})
    register_mixer("broken")(mixer_class)
    mixer = make_mixer("broken", n_agents=A, state_dim=S, n_actions=U)
    with pytest.raises(ValueError) as err:
        mixer(torch.randn(B, T, A), torch.randn(B, T, S))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("mixer BrokenMixer (registered as 'broken'): mix() returned " + got)
    assert f"expected a floating-point tensor of shape [B, T, 1] = {(B, T, 1)}" in message and "keepdim=True" in message


def test_the_output_check_passes_a_correct_mixer_untouched():
    mixer = _SumMixer(n_agents=A, state_dim=S, n_actions=U)
    qs = torch.randn(B, T, A)
    assert torch.equal(mixer(qs, torch.randn(B, T, S)), qs.sum(dim=-1, keepdim=True))


def test_registering_a_mixer_again_is_a_no_op_and_another_under_its_name_an_error(fresh_registries):
    register_mixer("twice")(_SumMixer)
    register_mixer("twice")(_SumMixer)  # a plugin imported twice
    other = type("OtherMixer", (_SumMixer,), {})
    with pytest.raises(ValueError, match=r"mixer name 'twice' is already registered to .*_SumMixer; pick another "
                                         r"name, or pass replace=True"):
        register_mixer("twice")(other)
    with pytest.raises(ValueError, match="mixer name 'qmix' is already registered"):
        register_mixer("qmix")(other)  # a built-in name, even before anything looked the built-ins up
    register_mixer("twice", replace=True)(other)
    assert type(make_mixer("twice", n_agents=A, state_dim=S, n_actions=U)) is other


def test_register_mixer_refuses_what_is_not_a_mixer_class(fresh_registries):
    with pytest.raises(TypeError, match=r"register_mixer\('plain'\) got .*expected a subclass of semzoo.Mixer"):
        register_mixer("plain")(torch.nn.Linear)
