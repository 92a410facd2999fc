"""A plugin module with a mistake: it registers an algorithm row whose mixer nobody registered."""

from __future__ import annotations

from semzoo import Algorithm, register_algorithm

register_algorithm(Algorithm("my-wqmix", "my-mixer", learner="semzoo.learners.wqmix:WQMIXLearner",
                             learner_args={"weighting": "cw"}))
