"""Training: trainer, episode runner, evaluation, run directory, checkpoints, sweeps (the analysis of finished runs is semzoo.analysis)."""
