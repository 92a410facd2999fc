"""Learners: the loss of eq. (6) (QLearner) and the learners that override its hooks (WQMIX)."""
