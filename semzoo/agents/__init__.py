"""Agents: the recurrent agent network, action selection, and the policy that plays a run's agents."""

from semzoo.agents.policy import Policy, load_policy

__all__ = ["Policy", "load_policy"]
