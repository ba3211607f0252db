# cython: language_level=3
"""The class of plast's element types (dtypes.py makes its five instances and holds the promotion rule)."""

cimport cython

import numpy as np

# name -> the dtype of that name, filled as dtypes.py makes its instances (unpickling looks names up here)
cdef dict _MADE = {}


def _by_name(name):
    return _MADE[name]


@cython.final
@cython.auto_pickle(False)
cdef class dtype:
    """A plast element type. Compare with ``plast.float32`` etc.; ``np`` is the matching numpy dtype.

    >>> plast.float32.itemsize, plast.float32.is_floating_point, plast.int64.np
    (4, True, dtype('int64'))
    """

    def __init__(self, str name, np_dtype, int rank, int code, floating=None):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        # floating=None: numpy's kind says; ml_dtypes' bfloat16 is kind "V" to numpy, so it is passed True
        self.is_floating_point = self.np.kind == "f" if floating is None else bool(floating)
        self.is_signed = self.is_floating_point or self.np.kind == "i"
        self._rank = rank
        self.code = code
        _MADE[name] = self

    def __repr__(self):
        return f"plast.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))
