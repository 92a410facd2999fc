"""Running experiments: trainer, episode runner, evaluation, run directory, checkpoints, sweeps, reports."""
