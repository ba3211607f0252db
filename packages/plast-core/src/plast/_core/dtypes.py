"""plast dtypes and the promotion rule.

Promotion (binary ops and matmul): bool < uint8, int8 < int16 < int32 < int64 < bfloat16, float16 < float32 <
float64, where uint8 with int8 gives int16 and bfloat16 with float16 gives float32 (as torch), and with one
exception to torch:
matmul between an integer and a floating tensor promotes to the floating type instead of raising, so integer
data (``plast.tensor([[0, 1]])``) meets float parameters. Python scalars are "weak", as in torch: a Python float
with an integer or bool tensor gives the default dtype (float32 unless ``set_default_dtype`` changed it); a Python
int or float with a float32 tensor stays float32.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._dtype import dtype as _DType
from .codes import DTYPE_CODES as _CODE
from .errors import DTypeError

# compiled (_dtype.pyx): kernels read itemsize, code and is_floating_point as C fields
dtype = _DType


# name, numpy dtype, promotion rank, kernel code (numbered in codes.h; the C kernels and plan fingerprints read it)
bool_ = dtype("bool", np.bool_, 0, _CODE["bool"])
# The small integer types are storage types too: every op but casts, copies and views computes in int32, and the
# result is cast back, wrapping around as torch's uint8/int8/int16 arithmetic does (graph/_graph.pyx: record).
uint8 = dtype("uint8", np.uint8, 1, _CODE["uint8"])
int8 = dtype("int8", np.int8, 1, _CODE["int8"])
int16 = dtype("int16", np.int16, 2, _CODE["int16"])
int32 = dtype("int32", np.int32, 3, _CODE["int32"])
int64 = dtype("int64", np.int64, 4, _CODE["int64"])
float32 = dtype("float32", np.float32, 6, _CODE["float32"])
float64 = dtype("float64", np.float64, 7, _CODE["float64"])
# The 16-bit floating types are storage types: an op without a 16-bit kernel computes in float32 and rounds its
# result once (graph/_graph.pyx: record), as torch's CPU kernels do. numpy has no bfloat16; ml_dtypes (JAX's)
# gives it one with round-to-nearest-even casts, so every host path (numpy views, copies, casts, .numpy(),
# safetensors) treats bfloat16 like any other dtype instead of as uint16 bit patterns numpy math would misread.
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 5, _CODE["bfloat16"], floating=True)
float16 = dtype("float16", np.float16, 5, _CODE["float16"])

ALL = (bool_, int32, int64, float32, float64, bfloat16, float16, uint8, int8, int16)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(
    {
        "float": float32,
        "double": float64,
        "long": int64,
        "int": int32,
        "half": float16,
        "short": int16,
        "char": int8,
    }
)
_BY_NP = {d.np: d for d in ALL}

# The default floating dtype (torch's get_default_dtype): read at call time as ``dtypes.default_float`` by the
# factories, tensor()'s inference and every integer-to-floating promotion; set_default_dtype rebinds it.
default_float = float32
default_int = int64


def get_default_dtype() -> dtype:
    """The dtype of floating factories without ``dtype=``, of Python floats in ``tensor()`` and of integer data
    promoted to floating point (``int_tensor / 2``, ``int_tensor * 2.5``, ``int_tensor.sin()``): float32 unless
    ``set_default_dtype`` changed it.

    >>> import plast
    >>> plast.get_default_dtype()
    plast.float32
    """
    return default_float


def set_default_dtype(d: dtype | str | type) -> None:
    """Set the default floating dtype, as ``torch.set_default_dtype``: float32 (the default) or float64.

    It is the dtype of floating factories without ``dtype=`` (``zeros``, ``ones``, ``empty``, ``full`` with a
    float fill, ``rand``, ``randn``, ``eye``, ``arange``/``linspace``/``logspace`` with float arguments,
    ``scalar_tensor``), of Python floats in ``tensor()``/``as_tensor()``, of a Python float combined with an
    integer or bool tensor, of true division and floating functions of integer tensors, and so of the parameters
    nn layers create. As in torch, ``*_like`` factories keep their input's dtype, ``t.float()`` is float32 and a
    float32 tensor with a Python float stays float32. Non-floating types raise TypeError, as in torch;
    bfloat16 and float16 raise NotImplementedError (plast's 16-bit types are storage types: their in-place
    optimizer updates and CUDA kernels are missing). The setting is process-wide, as torch's.

    >>> plast.set_default_dtype(plast.float64)
    >>> plast.tensor([1.5]).dtype, (plast.arange(3) / 2).dtype
    (plast.float64, plast.float64)
    >>> plast.set_default_dtype(plast.float32)
    """
    global default_float
    d = as_dtype(d)
    if d is float32 or d is float64:
        default_float = d
        return
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating point types are supported as the default, got {d}")
    raise NotImplementedError(
        f"plast does not implement set_default_dtype({d}): the default may be float32 or float64 (plast's "
        f"16-bit types are storage types, without 16-bit in-place optimizer updates or CUDA kernels)"
    )


def as_dtype(x: dtype | str | type | np.dtype) -> dtype:
    """Turn a plast dtype, a numpy dtype or type, a name, or the Python types bool/int/float into a plast dtype
    (as torch: ``dtype=float`` is float64, ``int`` int64, whatever the default dtype)."""
    if isinstance(x, dtype):
        return x
    if x is bool:
        return bool_
    if x is int:
        return int64
    if x is float:
        return float64
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    try:
        nd = np.dtype(x)
    except TypeError:
        nd = None
    if nd is not None and nd in _BY_NP:
        return _BY_NP[nd]
    supported = ", ".join(d.name for d in ALL)
    raise DTypeError(f"unsupported dtype {x!r}; plast supports {supported}")


def from_numpy_dtype(nd):
    """The plast dtype of a numpy dtype, or DTypeError naming the supported ones."""
    d = _BY_NP.get(np.dtype(nd))
    if d is None:
        supported = ", ".join(d.name for d in ALL)
        raise DTypeError(f"numpy dtype {np.dtype(nd)} has no plast equivalent; supported: {supported}")
    return d


def promote(a, b):
    """Result dtype of a binary op between two tensors of dtypes a and b."""
    if a._rank == b._rank and a is not b:  # neither holds the other: uint8 with int8, bfloat16 with float16
        return float32 if a.is_floating_point else int16
    return a if a._rank >= b._rank else b


def is_small_int(d):
    """d is uint8, int8 or int16 (a storage type computed in int32 by every op but casts, copies and views)."""
    return d.itemsize < 4 and not d.is_floating_point and d is not bool_


def is_16bit(d):
    """d is bfloat16 or float16 (a storage type computed in float32 by ops without a 16-bit kernel)."""
    return d.itemsize == 2 and d.is_floating_point


def check_16bit_device(d, device, what):
    """NotImplementedError for a 16-bit tensor on a device without 16-bit kernels (CUDA, for now)."""
    if device.type != "cpu" and d.itemsize == 2 and d.is_floating_point:
        raise NotImplementedError(
            f"{what}: {d} tensors on {device.type} are not supported yet (the CUDA backend has no 16-bit "
            f"kernels); keep {device.type} tensors float32"
        )


def _category(d):
    return 2 if d.is_floating_point else 0 if d is bool_ else 1


def _scalar_category(v):
    return 0 if isinstance(v, bool) else 1 if isinstance(v, int) else 2


def _default_of(c):
    return bool_ if c == 0 else int64 if c == 1 else default_float


def result_type(tensors, scalars=()):
    """torch's promotion over operands: dimensioned tensors decide; a 0-d tensor counts only when its category
    (bool < integer < floating) is higher; a Python scalar only when its category is higher, and then gives
    that category's default dtype (int64, or the default floating dtype: float32 unless set_default_dtype
    changed it).

    >>> result_type([plast.ones(3)], [2.5])  # doctest: +SKIP
    plast.float32
    """
    if not scalars and len(tensors) == 2:
        a, b = tensors
        if a.dtype is b.dtype:  # the common case: one dtype, whatever the dims
            return a.dtype
    dim = zero = None
    for t in tensors:
        if t.ndim:
            dim = t.dtype if dim is None else promote(dim, t.dtype)
        else:
            zero = t.dtype if zero is None else promote(zero, t.dtype)
    cur = dim
    if zero is not None and (cur is None or _category(zero) > _category(cur)):
        cur = zero
    for v in scalars:
        if isinstance(v, bool) or isinstance(v, (int, float)):
            c = _scalar_category(v)
            if cur is None:
                cur = _default_of(c)
            elif c > _category(cur):
                cur = _default_of(c)
        else:
            raise DTypeError(f"expected a tensor or a Python number, got {type(v).__name__}")
    return cur
