"""Small built-in datasets.

``digits()`` wraps scikit-learn's bundled 8x8 handwritten digits (1,797 images, no download), for demos and
tests that want real data. scikit-learn is an optional extra: ``pip install "packages/plast-data[digits]"``.
"""

import numpy as np


def digits(*, flatten=True, normalize=True):
    """The 8x8 digits as a TensorDataset of (image, label).

    Images are float32, ``flatten=True`` gives rows of 64 pixels (else (8, 8) images), ``normalize=True`` scales
    the 0..16 intensities to [0, 1]. Labels are int64 in 0..9.

    >>> ds = digits()  # doctest: +SKIP
    >>> len(ds), ds[0][0].shape  # doctest: +SKIP
    (1797, plast.Size([64]))
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError(
            "plast.data.datasets.digits() needs scikit-learn, an optional extra of plast-data: "
            'pip install "packages/plast-data[digits]" (or pip install scikit-learn)'
        ) from e
    import plast

    from .dataset import TensorDataset

    bunch = load_digits()
    x = np.asarray(bunch.images if not flatten else bunch.data, dtype=np.float32)
    if normalize:
        x = x / np.float32(16.0)
    y = np.asarray(bunch.target, dtype=np.int64)
    return TensorDataset(plast.tensor(np.ascontiguousarray(x)), plast.tensor(y))


__all__ = ["digits"]
