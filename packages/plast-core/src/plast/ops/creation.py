"""Tensor factories (plast.tensor, zeros, arange, rand, ...). Everything made here is a leaf in the persistent
arena (DESIGN §3), made by ops/factory.py."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import dtypes
from .._core._structs import TensorBase
from .._core.devices import as_device
from .._core.errors import DTypeError
from .._core.hints import DeviceLike, DTypeLike, Number, SizeArg
from ..graph import tape
from ..graph._graph import tensor_class
from ..memory.arena import borrow
from . import random
from .factory import from_array as _from_array
from .factory import leaf_array as _leaf_array
from .factory import new_leaf as _new_leaf
from .factory import write as _write


def _shape_arg(size, fn):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{fn}: sizes must be ints, got {size!r}")
        if s < 0:
            raise ValueError(f"{fn}: negative dimension {s} in size {tuple(size)}")
    return tuple(int(s) for s in size)


def _no_more(kwargs, fn):
    if kwargs:
        raise TypeError(f"{fn}() got an unexpected keyword argument {next(iter(kwargs))!r}")


def _sizes(size, size_kw, fn):
    """torch's size forms: varargs ``(2, 3)``, one tuple or list ``((2, 3),)``, or ``size=`` as a keyword."""
    if size_kw is not None:
        if size:
            raise TypeError(f"{fn}: size given both positionally and as size=")
        size = (size_kw,) if isinstance(size_kw, (int, np.integer)) else (tuple(size_kw),)
    return _shape_arg(size, fn)


def _into(out, t, fn):
    """``out=``: write the result into `out` (same shape and dtype; plast does not resize or cast `out`)."""
    if out is None:
        return t
    if tuple(out.shape) != tuple(t.shape) or out.dtype != t.dtype:
        raise RuntimeError(
            f"{fn}: out= must have the result's shape {tuple(t.shape)} and dtype {t.dtype}, got "
            f"{tuple(out.shape)} and {out.dtype} (plast does not resize or cast out=)"
        )
    return out.copy_(t)


_INT_RANGE = {
    d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
    for d in (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
}


def _scan_numbers(data):
    """(holds a float, smallest int, largest int) of nested Python data, or None when a leaf is not a number."""
    has_float, lo, hi = False, 0, 0
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, (bool, np.bool_)):
            continue
        elif isinstance(x, (int, np.integer)):
            lo, hi = min(lo, int(x)), max(hi, int(x))
        elif isinstance(x, (float, np.floating)):
            has_float = True
        else:
            return None
    return has_float, lo, hi


def _wide_ints(data, want, fn):
    """Nested Python data holding an int past int64, which numpy turns into uint64 (2**63 read back as -2**63),
    float64 (``[[1], [2**63]]``) or objects, converted by torch's rules instead: a float tensor takes any int, an
    integer tensor raises torch's ValueError. (arr, inferred dtype), or None when it is no such data."""
    scan = _scan_numbers(data)
    if scan is None:
        return None
    has_float, lo, hi = scan
    target = want or (dtypes.default_float if has_float else dtypes.int64)
    if target is dtypes.bool_:
        return np.array(data, dtype=object).astype(np.bool_), None
    if target.is_floating_point or has_float:
        # (floats for an integer dtype: tensor() checks that they fit it)
        return np.array(data, dtype=np.float64), dtypes.default_float if want is None else None
    bad = lo if lo < -(2**63) else hi
    if bad < -(2**63) or bad > 2**63 - 1:
        # torch's exception and words (its conversion of each Python int to a C long long)
        raise ValueError(
            f"{fn}: Overflow when unpacking long long: {bad} does not fit in int64 (a tensor of ints holds "
            f"-2**63 to 2**63-1; pass dtype=plast.float64 for a float tensor)"
        )
    return np.array(data, dtype=np.int64), dtypes.int64


def _check_int_range(arr, dt, fn):
    """Python values stored in an integer tensor must fit it, as torch checks (numpy's cast would wrap 2**31 to
    -2**31 in int32, and turn nan or 1e10 into garbage)."""
    if dt not in _INT_RANGE or not arr.size or arr.dtype.kind not in "iuf":
        return
    lo, hi = _INT_RANGE[dt]
    if arr.dtype.kind == "f":
        # float64 rounds hi (2**63 - 1) up to 2**63, which no int64 holds: the bound is exclusive
        ok = np.isfinite(arr).all() and arr.min() >= lo and arr.max() < float(hi) + 1
    else:
        ok = int(arr.min()) >= lo and int(arr.max()) <= hi
    if not ok:
        raise RuntimeError(f"{fn}: value cannot be converted to type {dt} without overflow")


def _to_numpy(data, fn="tensor", want=None):
    """Convert nested Python data / numpy arrays to an ndarray with torch's inference rules (`want`: the dtype
    asked for, if any)."""
    if isinstance(data, TensorBase):
        return data.detach().numpy(), data.dtype
    if isinstance(data, np.ndarray):
        return data, None
    if isinstance(data, (str, bytes)):
        raise TypeError(f"{fn}: expected numbers or nested sequences of numbers, got a {type(data).__name__}")
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(
            f"{fn}: the nested sequences have different lengths (a ragged list); every row must have the "
            f"same length. numpy said: {e}"
        ) from None
    if arr.dtype.kind in "uO" or (
        arr.dtype.kind == "f" and arr.size and np.abs(arr).max(initial=0.0, where=~np.isnan(arr)) >= 2.0**63
    ):
        # an int past int64 somewhere (or large floats, rarely): look at the Python values themselves
        wide = _wide_ints(data, want, fn)
        if wide is not None:
            return wide
    if arr.dtype.kind in "OUSV" or arr.dtype.kind == "c":
        kind = {"U": "strings", "S": "bytes", "O": "objects", "c": "complex numbers", "V": "records"}.get(
            arr.dtype.kind, str(arr.dtype)
        )
        raise TypeError(
            f"{fn}: can't make a tensor of {kind}; expected (nested lists of) bools, ints or floats"
        )
    inferred = None
    if arr.dtype.kind == "f":
        inferred = dtypes.default_float  # Python floats: the default dtype (float32 unless set), as in torch
    elif arr.dtype.kind in "iu":
        inferred = dtypes.int64
    elif arr.dtype.kind == "b":
        inferred = dtypes.bool_
    return arr, inferred


def tensor(
    data: Any, dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False
) -> TensorBase:
    """A new leaf tensor holding a copy of `data` (nested lists, numbers, numpy arrays, tensors).

    Python ints give int64, Python floats the default dtype (float32 unless ``set_default_dtype`` changed
    it), numpy arrays keep their dtype.

    >>> plast.tensor([[0, 1], [1, 0]]).dtype
    plast.int64
    """
    want = dtypes.as_dtype(dtype) if dtype is not None else None
    arr, inferred = _to_numpy(data, want=want)
    if device is None and isinstance(data, TensorBase):
        device = data.device  # a copy of a tensor stays on its device, as in torch
    if want is not None:
        dt = want
        if not isinstance(data, (TensorBase, np.ndarray)):
            _check_int_range(arr, dt, "tensor")
    elif inferred is not None:
        dt = inferred
    else:
        dt = dtypes.from_numpy_dtype(arr.dtype)
    if requires_grad and not dt.is_floating_point:
        raise RuntimeError(f"only floating point tensors can require gradients, got dtype {dt}")
    return _from_array(arr, dt, device, requires_grad)


def as_tensor(data: Any, dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> TensorBase:
    if isinstance(data, TensorBase) and (dtype is None or dtypes.as_dtype(dtype) is data.dtype):
        return data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> TensorBase:
    """A tensor sharing memory with a C-contiguous numpy array (changes show on both sides), like torch."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(arr).__name__}")
    dt = dtypes.from_numpy_dtype(arr.dtype)
    if not arr.flags.c_contiguous:
        raise ValueError("from_numpy needs a C-contiguous array; pass np.ascontiguousarray(a) (which copies)")
    if not arr.flags.writeable:
        raise ValueError("from_numpy needs a writeable array (plast may write through it); pass a.copy()")
    if arr.dtype.byteorder not in "=|" and arr.dtype.byteorder != ("<" if np.little_endian else ">"):
        raise DTypeError(
            "from_numpy needs native byte order; convert with a.astype(a.dtype.newbyteorder('='))"
        )
    st = borrow(arr, arr.__array_interface__["data"][0], arr.nbytes)
    # numpy writes to `arr` are invisible to the graph: while the caller (or a view) still holds it, ops on it
    # compute at once (graph/_graph._numpy_shared)
    st.numpy_owner = True
    return tensor_class()._from_storage(st, arr.shape, dt)


def empty(
    *size: SizeArg,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> TensorBase:
    shape = _sizes(size, kwargs.pop("size", None), "empty")
    _no_more(kwargs, "empty")
    if out is not None:
        return _into(out, _new_leaf(shape, out.dtype, out.device, False, zero=True), "empty")
    return _new_leaf(shape, dtypes.as_dtype(dtype or dtypes.default_float), device, requires_grad)


def full(
    size: int | Sequence[int],
    fill_value: Number,
    *,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    if out is not None:
        t = full(size, fill_value, dtype=dtype or out.dtype, device=out.device)
        return _into(out, t, "full")
    shape = _shape_arg((size,) if isinstance(size, int) else tuple(size), "full")
    if not isinstance(fill_value, (numbers.Number, np.number)):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    if dtype is None:
        dtype = (
            dtypes.bool_
            if isinstance(fill_value, (bool, np.bool_))
            else dtypes.int64
            if isinstance(fill_value, (int, np.integer))
            else dtypes.default_float
        )
    dt = dtypes.as_dtype(dtype)
    if dt in _INT_RANGE and not isinstance(fill_value, (bool, np.bool_)):
        lo, hi = _INT_RANGE[dt]
        v = fill_value
        # exact comparisons of the Python value (numpy's fill would wrap it or raise OverflowError)
        if not (lo <= v < hi + 1 if isinstance(v, (float, np.floating)) else lo <= v <= hi):
            raise RuntimeError(f"full: value {v!r} cannot be converted to type {dt} without overflow")
    if as_device(device).type == "cuda":
        # zeros: a memset; other values: one fill kernel on the device
        t = _new_leaf(shape, dt, device, requires_grad, zero=fill_value == 0)
        if t.numel() and fill_value != 0:
            from ..kernels.cuda import kernels as cuda_kernels

            cuda_kernels.fill_value(cuda_kernels.addr(t), t._shape, t._strides, dt.code, fill_value)
        return t
    t = _new_leaf(shape, dt, device, requires_grad)
    if t.numel():
        _leaf_array(t).fill(fill_value)
    return t


def zeros(
    *size: SizeArg,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> TensorBase:
    shape = _sizes(size, kwargs.pop("size", None), "zeros")
    _no_more(kwargs, "zeros")
    if out is not None:
        return _into(out, full(shape, 0, dtype=dtype or out.dtype, device=out.device), "zeros")
    return full(
        shape,
        0,
        dtype=dtype or dtypes.default_float,
        device=device,
        requires_grad=requires_grad,
    )


def ones(
    *size: SizeArg,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> TensorBase:
    shape = _sizes(size, kwargs.pop("size", None), "ones")
    _no_more(kwargs, "ones")
    if out is not None:
        return _into(out, full(shape, 1, dtype=dtype or out.dtype, device=out.device), "ones")
    return full(
        shape,
        1,
        dtype=dtype or dtypes.default_float,
        device=device,
        requires_grad=requires_grad,
    )


def _like(t, dtype):
    if not isinstance(t, TensorBase):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    return t.shape, (dtype or t.dtype)


def zeros_like(
    t: TensorBase,
    dtype: DTypeLike | None = None,
    requires_grad: bool = False,
    device: DeviceLike | None = None,
) -> TensorBase:
    shape, dt = _like(t, dtype)
    return zeros(shape, dtype=dt, device=device or t.device, requires_grad=requires_grad)


def ones_like(
    t: TensorBase,
    dtype: DTypeLike | None = None,
    requires_grad: bool = False,
    device: DeviceLike | None = None,
) -> TensorBase:
    shape, dt = _like(t, dtype)
    return ones(shape, dtype=dt, device=device or t.device, requires_grad=requires_grad)


def full_like(
    t: TensorBase,
    fill_value: Number,
    dtype: DTypeLike | None = None,
    requires_grad: bool = False,
    device: DeviceLike | None = None,
) -> TensorBase:
    shape, dt = _like(t, dtype)
    return full(shape, fill_value, dtype=dt, device=device or t.device, requires_grad=requires_grad)


def empty_like(
    t: TensorBase,
    dtype: DTypeLike | None = None,
    requires_grad: bool = False,
    device: DeviceLike | None = None,
) -> TensorBase:
    shape, dt = _like(t, dtype)
    return empty(shape, dtype=dt, device=device or t.device, requires_grad=requires_grad)


def arange(
    start: float,
    end: float | None = None,
    step: float = 1,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    """Values from start (inclusive) to end (exclusive) by step; ints give int64, any float gives the default dtype
    (float32 unless set_default_dtype changed it)."""
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
            raise TypeError(f"arange: start, end and step must be numbers, got {v!r}")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")  # torch's exception type
    if not all(np.isfinite(float(v)) for v in (start, end)):
        raise RuntimeError(f"arange: unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        # torch raises here; an empty result would hide a sign mistake (arange(0, 10, -1))
        raise RuntimeError(
            f"arange: upper bound and lower bound inconsistent with step sign (start={start}, end={end}, "
            f"step={step})"
        )
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = dtypes.int64 if is_int else dtypes.default_float
    dt = dtypes.as_dtype(dtype)
    # NOTE: computed in float64/int64 then cast, so float32 ranges match torch's length rule ceil((end-start)/step).
    n = max(0, int(np.ceil((end - start) / step)))
    arr = start + step * np.arange(n, dtype=np.float64 if dt.is_floating_point else np.int64)
    return _from_array(arr.astype(dt.np), dt, device, requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative int, got {steps!r}")
    dt = dtypes.as_dtype(dtype or dtypes.default_float)
    return _from_array(
        np.linspace(start, end, steps, dtype=np.float64).astype(dt.np), dt, device, requires_grad
    )


def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    """``base ** linspace(start, end, steps)`` (computed in float64, then cast); the default dtype unless
    ``dtype=``, as torch.

    >>> plast.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"logspace: steps must be a non-negative int, got {steps!r}")
    dt = dtypes.as_dtype(dtype or dtypes.default_float)
    exps = np.linspace(start, end, steps, dtype=np.float64)
    return _from_array(np.power(float(base), exps).astype(dt.np), dt, device, requires_grad)


def scalar_tensor(
    s: float, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None, requires_grad: bool = False
) -> TensorBase:
    """A 0-d tensor holding the number `s`, of the default dtype (float32 unless set) unless ``dtype=``, whatever
    the number's type (``scalar_tensor(3)`` is ``3.``), as torch.

    >>> plast.scalar_tensor(3).tolist()
    3.0
    """
    if isinstance(s, TensorBase) or not isinstance(s, (numbers.Number, np.number)):
        raise TypeError(f"scalar_tensor: s must be a number, got {type(s).__name__}")
    return tensor(s, dtype=dtype or dtypes.default_float, device=device, requires_grad=requires_grad)


def eye(
    n: int,
    m: int | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    dt = dtypes.as_dtype(dtype or dtypes.default_float)
    return _from_array(np.eye(n, m, dtype=dt.np), dt, device, requires_grad)


def _random_leaf(kind, size, fn, p1, p2, generator, dtype, device, requires_grad, out=None, kwargs=None):
    shape = _sizes(size, kwargs.pop("size", None) if kwargs else None, fn)
    _no_more(kwargs or {}, fn)
    if out is not None:
        t = _random_leaf(kind, shape, fn, p1, p2, generator, dtype or out.dtype, out.device, False)
        return _into(out, t, fn)
    dt = dtypes.as_dtype(dtype or dtypes.default_float)
    if not dt.is_floating_point:
        raise DTypeError(f"{fn}: dtype must be floating point, got {dt}")
    t = _new_leaf(shape, dt, device, requires_grad)
    if t.device.type == "cuda":
        return _fill_random_cuda(t, kind, p1, p2, generator)
    return random.fill_tensor(t, kind, p1, p2, generator)


def _fill_random_cuda(t, kind, p1, p2, generator):
    """random.fill_tensor's twin on the GPU: the Philox kernel draws the CPU's numbers for the same
    (seed, offset), and the generator's offset moves the same way."""
    from ..kernels.cuda import kernels, kernels_nn

    g = random._gen(generator)

    def draw(out):
        n = out.numel()
        if n:
            seed, off = g._take(random.blocks_for(kind, out.dtype.code, n))
            kernels_nn.philox_fill(kind, out.dtype.code, seed, off, kernels.addr(out), n, p1, p2)

    draw(t)
    tape.note_random(draw, t, f"random_{kind}")
    return t


def rand(
    *size: SizeArg,
    generator: random.Generator | None = None,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> TensorBase:
    """Uniform on [0, 1), from the Philox stream of `generator` (the global one by default)."""
    return _random_leaf(
        "uniform", size, "rand", 0.0, 1.0, generator, dtype, device, requires_grad, out, kwargs
    )


def randn(
    *size: SizeArg,
    generator: random.Generator | None = None,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> TensorBase:
    """Standard normal, from the Philox stream of `generator` (the global one by default)."""
    return _random_leaf(
        "normal", size, "randn", 0.0, 1.0, generator, dtype, device, requires_grad, out, kwargs
    )


def randint(
    low: int,
    high: int | None = None,
    size: SizeArg | None = None,
    generator: random.Generator | None = None,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    """Integers uniform on [low, high); torch's overloads ``randint(high, size)`` and ``randint(low, high, size)``.

    >>> import plast
    >>> plast.randint(10, (3,)).shape, plast.randint(2, 5, size=[2, 2]).shape
    (plast.Size([3]), plast.Size([2, 2]))
    """
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if requires_grad:
        raise RuntimeError("randint: only floating point tensors can require gradients")
    if out is not None:
        t = randint(low, high, size, generator=generator, dtype=dtype or out.dtype, device=out.device)
        return _into(out, t, "randint")
    if size is None:
        raise TypeError("randint: size is required, e.g. plast.randint(0, 10, (3,))")
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    shape = _shape_arg(tuple(size) if isinstance(size, (tuple, list)) else (size,), "randint")
    dt = dtypes.as_dtype(dtype or dtypes.int64)
    t = _new_leaf(shape, dt, device)
    g = random._gen(generator)
    span = np.uint64(high - low)

    def draw(out):
        n = out.numel()
        if not n:
            return
        # two 32-bit draws per element make a 64-bit value; the modulo bias is below 2^-32 for spans < 2^32
        raw = np.empty(2 * n, dtype=np.uint32)
        random.fill("u32", raw.__array_interface__["data"][0], 0, 2 * n, 0.0, 0.0, g)
        vals = (raw.view(np.uint64) % span).astype(np.int64) + low
        _write(out, vals.reshape(out.shape).astype(dt.np))

    draw(t)
    tape.note_random(draw, t, "randint")
    return t


def rand_like(
    t: TensorBase,
    generator: random.Generator | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
) -> TensorBase:
    return rand(t.shape, generator=generator, dtype=dtype or t.dtype, device=device or t.device)


def randn_like(
    t: TensorBase,
    generator: random.Generator | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
) -> TensorBase:
    return randn(t.shape, generator=generator, dtype=dtype or t.dtype, device=device or t.device)


def randperm(
    n: int,
    *,
    generator: random.Generator | None = None,
    out: TensorBase | None = None,
    dtype: DTypeLike | None = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> TensorBase:
    """A random permutation of 0..n-1 (int64 by default), from the Philox stream of `generator`.

    >>> import plast
    >>> sorted(plast.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
    dt = dtypes.as_dtype(dtype or (out.dtype if out is not None else dtypes.int64))
    if requires_grad and not dt.is_floating_point:
        raise RuntimeError("randperm: only floating point tensors can require gradients")
    if out is not None:
        return _into(out, randperm(n, generator=generator, dtype=dt, device=out.device), "randperm")
    t = _new_leaf((int(n),), dt, device, requires_grad)
    g = random._gen(generator)

    def draw(out):
        k = out.numel()
        if not k:
            return
        # sort 64-bit random keys (two 32-bit draws each); ties (probability ~k^2 / 2^65) keep index order
        raw = np.empty(2 * k, dtype=np.uint32)
        random.fill("u32", raw.__array_interface__["data"][0], 0, 2 * k, 0.0, 0.0, g)
        _write(out, np.argsort(raw.view(np.uint64), kind="stable").astype(dt.np))

    draw(t)
    tape.note_random(draw, t, "randperm")
    return t
