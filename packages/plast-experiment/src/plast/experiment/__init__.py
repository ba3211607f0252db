"""plast.experiment: config, run tracking, checkpoints, plots and the `plast` CLI (plast-experiment)."""
