"""The analysis of finished runs: curves and score tables (report.py), the evaluation protocol (protocol.py), the
paper's own numbers (paper.py). It reads run directories (``semzoo.runfiles``) and imports nothing of the training
stack, torch included; the one step that re-runs policies, the absolute metric, is the training side's
(``semzoo.run.evaluation.compute_absolute``)."""
