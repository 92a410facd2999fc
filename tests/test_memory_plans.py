"""The memories' byte formulas (semzoo.episodic.plans) against the networks they count, and each built-in memory's
planned_nbytes as its formula: `semzoo memory-cost` prints the formulas without torch, the memory plan of a run
asks the classes, and both must say the same."""

from __future__ import annotations

import pytest
import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.config import AgentConfig, MemoryConfig, TrainConfig
from semzoo.episodic.emu import Embedder
from semzoo.episodic.lagma import VQVAE
from semzoo.episodic.memory import memory_class, memory_names
from semzoo.episodic.plans import (
    AGENT_PARAMETER_TENSORS,
    BUILTIN_PLANS,
    agent_parameter_count,
    embedder_parameter_count,
    vqvae_parameter_count,
)
from semzoo.episodic.setup import MemorySetup


def n_parameters(net: torch.nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize("agent", [AgentConfig(), AgentConfig(hidden_dim=7, obs_agent_id=False),
                                   AgentConfig(hidden_dim=5, obs_last_action=False)])
def test_the_agent_network_has_the_parameters_its_formula_counts(agent):
    net = RNNAgent(obs_dim=11, n_agents=3, n_actions=6, hidden_dim=agent.hidden_dim, obs_agent_id=agent.obs_agent_id,
                   obs_last_action=agent.obs_last_action)
    assert n_parameters(net) == agent_parameter_count(agent, obs_dim=11, n_agents=3, n_actions=6)
    assert len(list(net.parameters())) == AGENT_PARAMETER_TENSORS


def test_the_embedder_and_the_vqvae_have_the_parameters_their_formulas_count():
    assert n_parameters(Embedder(state_dim=13, embed_dim=4, hidden_dim=9)) == embedder_parameter_count(13, 4, 9)
    assert n_parameters(VQVAE(state_dim=13, latent_dim=3, hidden_dim=9, n_codes=17)) == vqvae_parameter_count(13, 3, 9, 17)


@pytest.mark.parametrize("changed", [False, True])
def test_every_built_in_memory_plans_its_formula(changed):
    sizes = {"state_dim": 40, "n_agents": 5, "n_actions": 11, "obs_dim": 30}
    assert set(BUILTIN_PLANS) <= set(memory_names())
    for name, plan in BUILTIN_PLANS.items():
        config = TrainConfig(algo=f"{name}-qmix")
        if changed:
            config = TrainConfig(algo=f"{name}-qmix", memory=MemoryConfig(capacity=777, proj_dim=6))
            config = config.with_settings("lagma", lagma_n_codes=32) if name == "lagma" else config
        setup = MemorySetup.of(config, **sizes)
        assert memory_class(name).planned_nbytes(setup) == plan(setup), name


def test_the_contract_names_every_hook_once_required_or_grouped():
    """REQUIRED_HOOKS are Memory's abstract methods, OPTIONAL_HOOKS each of its other hooks once."""
    from semzoo.episodic.memory import OPTIONAL_HOOKS, REQUIRED_HOOKS, Memory

    assert set(REQUIRED_HOOKS) == set(Memory.__abstractmethods__)
    optional = [hook for hooks in OPTIONAL_HOOKS.values() for hook in hooks]
    settings = {"name", "description", "size_setting", "env_step_interval",  # class attributes, not hooks
                "adds_reward", "adds_target", "adds_loss"}  # set from the hooks a subclass overrides
    hooks = {name for name in dir(Memory) if not name.startswith("_")} - settings
    assert len(optional) == len(set(optional)) and set(optional) == hooks - set(REQUIRED_HOOKS)
