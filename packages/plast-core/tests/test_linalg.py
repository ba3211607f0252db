"""plast.linalg (norm, vector_norm, matrix_norm) against torch.linalg: values and gradients."""

import math

import numpy as np
import pytest
import torch

import plast

RNG = np.random.default_rng(11)


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((5,), {}),
        ((3, 4), {}),
        ((3, 4), {"ord": "fro"}),
        ((3, 4), {"ord": "nuc"}),
        ((3, 4), {"ord": 2}),
        ((3, 4), {"ord": -2}),
        ((3, 4), {"ord": math.inf}),
        ((3, 4), {"ord": 1}),
        ((2, 3, 4), {"ord": "nuc", "dim": (1, 2)}),
        ((2, 3, 4), {"dim": 1, "ord": 3}),
        ((2, 3, 4), {"dim": (0, 2), "keepdim": True}),
    ],
)
def test_linalg_norm_matches_torch(shape, kwargs, device):
    x = RNG.standard_normal(shape)
    px = plast.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    pn, tn = plast.linalg.norm(px, **kwargs), torch.linalg.norm(tx, **kwargs)
    assert pn.device.type == device
    np.testing.assert_allclose(pn.detach().cpu().numpy(), tn.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = RNG.standard_normal(tuple(tn.shape))
    pn.backward(plast.tensor(g, device=device))
    tn.backward(torch.tensor(g))
    np.testing.assert_allclose(px.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_vector_and_matrix_norm_entry_points(device):
    x = RNG.standard_normal((4, 3))
    np.testing.assert_allclose(
        plast.linalg.vector_norm(plast.tensor(x, device=device), 1).item(),
        torch.linalg.vector_norm(torch.tensor(x), 1).item(),
    )
    np.testing.assert_allclose(
        plast.linalg.matrix_norm(plast.tensor(x, device=device), -1).item(),
        torch.linalg.matrix_norm(torch.tensor(x), -1).item(),
    )


def test_ord_on_a_3d_input_needs_dim():
    with pytest.raises(RuntimeError, match="dim="):
        plast.linalg.norm(plast.ones(2, 2, 2), ord=2)
