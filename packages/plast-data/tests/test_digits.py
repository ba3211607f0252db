"""plast.data.datasets.digits(): scikit-learn's bundled digits, or a clear ImportError naming the extra."""

import sys

import numpy as np
import pytest

import plast
from plast.data import datasets


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"plast-data\[digits\]"):
        datasets.digits()


def test_digits_when_scikit_learn_is_installed():
    pytest.importorskip("sklearn")
    ds = datasets.digits()
    assert len(ds) == 1797
    x, y = ds[0]
    assert tuple(x.shape) == (64,) and x.dtype == plast.float32 and y.dtype == plast.int64
    xs = np.stack([ds[i][0].numpy() for i in range(20)])
    assert 0.0 <= xs.min() and xs.max() <= 1.0
    assert tuple(datasets.digits(flatten=False)[0][0].shape) == (8, 8)
