"""What the optimizer tests share: plast and torch parameters made from the same random values, and the
tolerances their trajectories are compared with."""

import numpy as np
import torch

import plast
import plast.nn as nn

TOL = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
SHAPES = [(4, 3), (4,), (2, 4), (2,)]


def twin_params(dtype, seed=0):
    """(rng, plast Parameters, torch Parameters) of SHAPES, equal values; rng continues the same stream."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    return (
        rng,
        [nn.Parameter(plast.tensor(a)) for a in init],
        [torch.nn.Parameter(torch.tensor(a)) for a in init],
    )
