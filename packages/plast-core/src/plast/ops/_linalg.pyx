# cython: boundscheck=True, wraparound=True, binding=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is op-layer code, not a kernel.
"""matmul, addmm and linear, compiled: every Linear layer runs linear forward and two matmuls (with transposes)
backward, each step. Their checks, promotion and shape rules read the tensors' C fields and end in a C call to
``record``. The matmul and addmm rows of the op table are registered here, with their backward rules, and read at
C level; ops/linalg.py and ops/nn.py re-export the functions and rows.
"""

from plast._core._structs cimport TensorBase
from plast._core._state cimport flag
from plast.graph._graph cimport record

from .._core import autocast_state as _autocast_state
from .._core import dtypes as _dtypes
from . import autocast as _autocast
from .._core.errors import DeviceMismatchError, ShapeError
from .elementwise import add as _add
from .elementwise import mul as _mul
from ._movement import cast as _cast
from ._movement import reshape as _reshape
from ._movement import transpose as _transpose
from .._core._shapes import broadcast_shapes
from ..kernels.cpu import kernels as cpu
from ..kernels.cpu import kernels_nn as cpu_nn
from .registry import register

cdef dict _AC = _autocast_state.__dict__  # autocast: matmul, addmm and linear are on its LOWER list


# ---- backward rules: one gradient per input ----


def _matmul_bw(node, g):
    a, b = node.inputs
    ga = matmul(g, _transpose(b, -1, -2)) if a.requires_grad else None
    if not b.requires_grad:
        return ga, None
    if a.ndim == 2 and b.ndim == 2:
        return ga, weight_grad(a, g, b)
    return ga, matmul(_transpose(a, -1, -2), g)


def _addmm_bw(node, g):
    bias, a, b = node.inputs
    beta, alpha = node.args
    gbias = (g if beta == 1 else _mul(g, float(beta))) if bias.requires_grad else None
    ga = matmul(g, _transpose(b, 0, 1)) if a.requires_grad else None  # not for a layer's input data
    gb = weight_grad(a, g, b) if b.requires_grad else None
    if alpha != 1:
        ga = _mul(ga, float(alpha)) if ga is not None else None
        gb = _mul(gb, float(alpha)) if gb is not None else None
    return gbias, ga, gb


# ---- the rows (16-bit: csrc/gemm16.c), read at C level; Python names for ops/linalg.py and ops/nn.py ----

cdef object _MATMUL = register("matmul", cpu=cpu.matmul_nd, backward=_matmul_bw, half=True)
cdef object _ADDMM = register("addmm", cpu=cpu_nn.addmm, backward=_addmm_bw, half=True)
MATMUL, ADDMM = _MATMUL, _ADDMM


cdef inline object _promote(object a, object b):
    if a._rank == b._rank and a is not b:  # bfloat16 with float16, uint8 with int8 (dtypes.promote)
        return _dtypes.float32 if a.is_floating_point else _dtypes.int16
    return a if a._rank >= b._rank else b


cdef inline TensorBase _as(TensorBase t, object dt):
    return t if t.dtype is dt else <TensorBase>_cast(t, dt)


cdef inline TensorBase _tensor(object x, str op, str name):
    if not isinstance(x, TensorBase):  # every plast.Tensor is one
        raise TypeError(f"{op}: {name} must be a plast Tensor, got {type(x).__name__}")
    return <TensorBase>x


def same_device(str op, *ts):
    """Every tensor of `ts` (None entries skipped) on one device, or DeviceMismatchError (ops/nn.py's check)."""
    _same_device(op, ts)


def tensor_check(x, str op, str name="input"):
    """TypeError unless x is a plast Tensor (ops/nn.py's check)."""
    _tensor(x, op, name)


def loss_pair(input, target, str op):
    """An elementwise loss's input and target as tensors of one floating dtype (promoted; integer data becomes
    float32), checked to be plast tensors on one device (ops/nn.py's losses)."""
    cdef TensorBase x = _tensor(input, op, "input")
    cdef TensorBase t = _tensor(target, op, "target")
    if x.device is not t.device:
        _same_device(op, (x, t))
    dt = x.dtype if x.dtype is t.dtype else _promote(x.dtype, t.dtype)
    if not dt.is_floating_point:
        dt = _dtypes.float32
    return _as(x, dt), _as(t, dt)


cdef _same_device(str op, tuple ts):
    """Every tensor of `ts` (None entries skipped) on one device, or DeviceMismatchError."""
    first = None
    cdef bint same = True
    for t in ts:
        if t is None:
            continue
        if not isinstance(t, TensorBase):
            raise TypeError(f"{op}: expected plast Tensors, got {type(t).__name__}")
        if first is None:
            first = (<TensorBase>t).device
        elif (<TensorBase>t).device is not first:
            same = False
    if same:
        return
    devs = {(<TensorBase>t).device for t in ts if t is not None}
    if len(devs) > 1:
        raise DeviceMismatchError(
            f"{op}: inputs are on different devices ({', '.join(map(str, devs))}); move them with .to() first"
        )


def matmul(a, b):
    """Matrix product with torch's rules for 1-D and batched operands.

    >>> plast.matmul(plast.ones(2, 3), plast.ones(3)).tolist()
    [3.0, 3.0]
    """
    if flag(_AC, "active") and isinstance(a, TensorBase):
        low = _autocast.lower_args((a, b), (<TensorBase>a).device.type)
        if low is not None:
            a, b = low
    cdef TensorBase ta = <TensorBase?>a, tb = <TensorBase?>b
    if ta.device is not tb.device and ta.device != tb.device:
        raise DeviceMismatchError(f"matmul: inputs are on {ta.device} and {tb.device}")
    if len(ta._shape) == 0 or len(tb._shape) == 0:
        raise ShapeError(
            f"matmul: both arguments need at least 1 dimension, got {tuple(ta._shape)} and {tuple(tb._shape)}"
        )
    dt = ta.dtype if ta.dtype is tb.dtype else _promote(ta.dtype, tb.dtype)
    ta, tb = _as(ta, dt), _as(tb, dt)
    # 1-D operands become matrices and the added dim is removed afterwards, as in torch
    cdef bint squeeze_a = len(ta._shape) == 1, squeeze_b = len(tb._shape) == 1
    if squeeze_a:
        ta = <TensorBase>_reshape(ta, (1, ta._shape[0]))
    if squeeze_b:
        tb = <TensorBase>_reshape(tb, (tb._shape[0], 1))
    sa, sb = ta._shape, tb._shape
    if sa[-1] != sb[-2]:
        raise ShapeError(
            f"matmul: shapes {tuple(sa)} and {tuple(sb)} cannot be multiplied ({sa[-1]} != {sb[-2]})"
        )
    if len(sa) == 2 and len(sb) == 2:
        batch = ()
    else:
        batch = broadcast_shapes(sa[:-2], sb[:-2], op="matmul")
    shape = batch + (sa[-2], sb[-1])
    out = record(_MATMUL, (ta, tb), (), [(shape, dt)], ta.device)[0]
    if squeeze_a and squeeze_b:
        return _reshape(out, batch)
    if squeeze_a:
        return _reshape(out, batch + (sb[-1],))
    if squeeze_b:
        return _reshape(out, batch + (sa[-2],))
    return out


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) in one kernel; `input` broadcasts to the product's shape.

    >>> plast.addmm(plast.ones(2), plast.ones(1, 3), plast.ones(3, 2)).tolist()
    [[4.0, 4.0]]
    """
    if flag(_AC, "active") and isinstance(mat1, TensorBase):
        low = _autocast.lower_args((input, mat1, mat2), (<TensorBase>mat1).device.type)
        if low is not None:
            input, mat1, mat2 = low
    cdef TensorBase ti = _tensor(input, "addmm", "input")
    cdef TensorBase t1 = _tensor(mat1, "addmm", "mat1")
    cdef TensorBase t2 = _tensor(mat2, "addmm", "mat2")
    _same_device("addmm", (ti, t1, t2))
    return _addmm(ti, t1, t2, beta, alpha)


cdef object _addmm(TensorBase ti, TensorBase t1, TensorBase t2, beta, alpha):
    """addmm on checked tensors of one device (linear calls it without the Python call)."""
    s1, s2 = t1._shape, t2._shape
    if len(s1) != 2 or len(s2) != 2:
        raise ShapeError(f"addmm: mat1 and mat2 must be 2-D, got {tuple(s1)} and {tuple(s2)}")
    if s1[1] != s2[0]:
        raise ShapeError(
            f"addmm: mat1 {tuple(s1)} and mat2 {tuple(s2)} cannot be multiplied ({s1[1]} != {s2[0]})"
        )
    shape = (s1[0], s2[1])
    si = ti._shape
    # the common biases, (N,) and (M, N), need no general broadcasting check
    if not ((len(si) == 1 and si[0] == shape[1]) or si == shape) and (
        broadcast_shapes(si, shape, op="addmm") != shape
    ):
        raise ShapeError(f"addmm: input {tuple(si)} does not broadcast to the product's shape {shape}")
    dt = t1.dtype
    if ti.dtype is not dt or t2.dtype is not dt:
        dt = _promote(_promote(ti.dtype, t1.dtype), t2.dtype)
    return record(_ADDMM, (_as(ti, dt), _as(t1, dt), _as(t2, dt)), (beta, alpha), [(shape, dt)], t1.device)[0]


def linear(input, weight, bias=None):
    """input @ weight.T + bias with torch's layout (weight is [out_features, in_features]); 2-D inputs with a
    bias run as one addmm kernel.

    >>> plast.linear(plast.ones(4, 3), plast.ones(2, 3), plast.zeros(2)).shape
    plast.Size([4, 2])
    """
    if flag(_AC, "active") and isinstance(input, TensorBase):
        low = _autocast.lower_args((input, weight, bias), (<TensorBase>input).device.type)
        if low is not None:
            input, weight, bias = low
    cdef TensorBase x = _tensor(input, "linear", "input")
    cdef TensorBase w = _tensor(weight, "linear", "weight")
    _same_device("linear", (x, w, bias))
    cdef Py_ssize_t wnd = len(w._shape), xnd = len(x._shape)
    if wnd != 1 and wnd != 2:
        raise ShapeError(
            f"linear: weight must be 1-D or 2-D [out_features, in_features], got {tuple(w._shape)}"
        )
    in_f = w._shape[-1]
    if xnd == 0 or x._shape[-1] != in_f:
        raise ShapeError(
            f"linear: input {tuple(x._shape)} and weight {tuple(w._shape)} don't fit: the input's last "
            f"dim must be in_features={in_f}"
        )
    if wnd == 2 and xnd > 2:
        # (*, in) @ W.T as one (rows, in) @ (in, out) product: one GEMM of depth rows in backward for W's
        # gradient, instead of a batched product summed over the leading dims
        lead = tuple(x._shape[:-1])
        out = linear(_reshape(x, (-1, in_f)), w, bias)
        return _reshape(out, lead + (w._shape[0],))
    if bias is not None and wnd == 2 and xnd == 2:
        return _addmm(_tensor(bias, "linear", "bias"), x, <TensorBase>_transpose(w, 0, 1), 1, 1)
    out = matmul(x, _transpose(w, 0, 1) if wnd == 2 else w)
    return out if bias is None else _add(out, bias)


def weight_grad(a, g, b):
    """The gradient of b in a @ b (2-D a, b) for upstream gradient g: a.T @ g, computed in b's own layout when b
    is the transpose of a row-major matrix (a Linear layer's W.T), so the value the engine hands to W (through
    the transpose's backward) is W-shaped, contiguous memory, and W's gradient needs no copy."""
    cdef TensorBase tb = <TensorBase?>b
    st, sh = tb._strides, tb._shape
    if len(sh) == 2 and sh[0] > 1 and sh[1] > 1 and st[0] == 1 and st[1] == sh[0]:
        return _transpose(matmul(_transpose(g, 0, 1), a), 0, 1)
    return matmul(_transpose(a, 0, 1), g)
