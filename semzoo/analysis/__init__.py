"""The analysis of finished runs: curves and score tables (report.py), the evaluation protocol (protocol.py, over
statistics.py, pairing.py, figures.py, sensitivity.py, wall_cost.py, memory_use.py, marl_eval.py), the paper's own
numbers (paper.py). It reads run directories (``semzoo.runfiles``) and imports nothing of the training stack, torch
included; the one step that re-runs policies, the absolute metric, is the training side's
(``semzoo.run.evaluation.compute_absolute``)."""
