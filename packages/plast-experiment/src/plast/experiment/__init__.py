"""plast.experiment: config, run tracking, checkpoints, plots and the `plast` CLI (plast-experiment).

>>> from plast.experiment import load_config
>>> load_config(overrides=["model.n_layer=2"]).model.n_layer
2
"""

from plast.experiment.archs import register_arch, registered_archs
from plast.experiment.checkpoint import Checkpoint, Checkpointer, load_checkpoint, verify_checkpoint
from plast.experiment.config import Config, ConfigError, dump_config, load_config
from plast.experiment.runlock import RunLockedError
from plast.experiment.tracker import DatabaseLockedError, Series, Tracker
from plast.experiment.trainer import Trainer, TrainResult, prepare_data, sample_text

__all__ = [
    "Checkpoint",
    "Checkpointer",
    "Config",
    "ConfigError",
    "DatabaseLockedError",
    "RunLockedError",
    "Series",
    "TrainResult",
    "Tracker",
    "Trainer",
    "dump_config",
    "load_checkpoint",
    "load_config",
    "prepare_data",
    "register_arch",
    "registered_archs",
    "sample_text",
    "verify_checkpoint",
]
