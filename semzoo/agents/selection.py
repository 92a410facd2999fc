"""Action selection: epsilon-greedy over each agent's available actions."""

from __future__ import annotations

import torch

from semzoo.agents.rnn import MASKED_Q


def epsilon_greedy(q_NAU: torch.Tensor, avail_NAU: torch.Tensor, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """Greedy action over available actions, replaced by a uniform available one with probability epsilon. [N,A]"""
    greedy = q_NAU.masked_fill(~avail_NAU, MASKED_Q).argmax(dim=-1)
    if epsilon <= 0.0:
        return greedy
    n, a, u = avail_NAU.shape
    # The draws come from ``generator`` on the CPU, whatever device the Q values sit on: a CPU
    # generator cannot draw on a GPU (torch raises), and a seed then explores alike on every device.
    # Uniform over available actions: argmax of random keys that are -1 where unavailable.
    keys = torch.rand(n, a, u, generator=generator).to(q_NAU.device).masked_fill(~avail_NAU, -1.0)
    random_actions = keys.argmax(dim=-1)
    explore = torch.rand(n, a, generator=generator).to(q_NAU.device) < epsilon
    return torch.where(explore, random_actions, greedy)
