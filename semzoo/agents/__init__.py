"""Agents: the recurrent agent network and action selection."""
