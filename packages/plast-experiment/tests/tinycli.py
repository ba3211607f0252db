"""The ``plast`` command with TinyLM registered: what a user does to train their own model with the command
(``python -m tinycli train model.arch=tinylm ...``, this directory on ``sys.path``)."""

import sys

import tinylm  # noqa: F401  (registers model.arch "tinylm")

from plast.experiment.cli import main

if __name__ == "__main__":
    sys.exit(main())
