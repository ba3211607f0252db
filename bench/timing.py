"""Shared timing helpers of the bench scripts (each script runs as ``python bench/<script>.py``, so this module is
importable as ``timing``)."""

import time

import numpy as np


def median_time(fn, reps, warm=2):
    """Median wall time of one call of `fn` over `reps` calls, after `warm` untimed calls."""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def address(arr):
    """The data address of a numpy array (for the C kernel entry points)."""
    return arr.__array_interface__["data"][0]
