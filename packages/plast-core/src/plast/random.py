"""plast.random: torch.random's names for the global Philox generator. The generator itself lives in the op
layer (ops/random.py), beside the factories that draw from it."""

from .ops.random import (  # noqa: F401 (the public names)
    Generator,
    blocks_for,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
