"""Launchers for the op table's "cuda" column: one Python function per op family, same contract as the CPU
kernels (``kernel(node, inputs, outputs)``; inputs with any strides, outputs freshly allocated and contiguous).

A launcher reads device pointers, shapes and strides off plast tensors, merges dims that are contiguous for
every operand (so most elementwise calls become 1-d), packs the parameters (abi.py) and picks grid and block
sizes. Kernels that read indices (embedding ids, class targets, gather indices) or divide integers report a bad
value through a device error flag; the launcher reads it back and raises IndexError / ZeroDivisionError with
the CPU kernel's message, before anyone can read the output.

table.py gathers these launchers (and kernels_nn's, kernels_extra's, transfer's) into the op table's "cuda" column,
which the op layer fills for the first CUDA tensor (plast.ops.registry.register_cuda_kernels). Ops with no CUDA
kernel yet get a stub that raises NotImplementedError naming the op.

Importable without pycuda: pycuda is only touched when a kernel launches.
"""

import numpy as np

from ..._core import codes
from ...memory import cuda as memory
from . import abi, graphs, loader
from .abi import Params, flagged_error

# the codes of the dtypes the CUDA kernels take (numbered in _core/codes.h): an Operand's `code`; a kernel's name
# ends with its dtype's suffix
BOOL, I32, I64, F32, F64 = (codes.DTYPE_CODES[n] for n in ("bool", "int32", "int64", "float32", "float64"))
SUF = {BOOL: "u8", I32: "i32", I64: "i64", F32: "f32", F64: "f64"}
NP_DTYPE = {BOOL: np.bool_, I32: np.int32, I64: np.int64, F32: np.float32, F64: np.float64}
ITEMSIZE = {BOOL: 1, I32: 4, I64: 8, F32: 4, F64: 8}
BLOCK = 256
MAX_GRID = 1 << 20  # grid-stride loops: more blocks than this only add scheduling work


def cdiv(a, b):
    return -(-a // b)


def pow2_at_least(n, lo=32, hi=1024):
    p = lo
    while p < n and p < hi:
        p *= 2
    return p


def grid1(n, block=BLOCK):
    return (max(1, min(cdiv(n, block), MAX_GRID)),)


def prod(shape):
    r = 1
    for s in shape:
        r *= int(s)
    return r


def contiguous_strides(shape):
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= max(int(shape[i]), 1)
    return tuple(st)


def addr(t):
    """Device address of a tensor's first element."""
    return t._storage.address + t._offset * t.dtype.itemsize


def bcast_strides(t, shape):
    """Strides (elements) of `t` broadcast to `shape` (0 along broadcast dims)."""
    nd = len(shape)
    pad = nd - len(t._shape)
    out = [0] * nd
    for i in range(len(t._shape)):
        if t._shape[i] != 1 or shape[pad + i] == 1:
            out[pad + i] = t._strides[i]
    return tuple(out)


def is_contiguous(t):
    return tuple(t._strides) == contiguous_strides(t._shape) or t.numel() <= 1


def collapse(shape, stride_lists):
    """Drop size-1 dims and merge neighbours that are contiguous in every operand: (shape, [strides, ...])."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    shp = [int(shape[i]) for i in dims]
    sts = [[int(st[i]) for i in dims] for st in stride_lists]
    i = len(shp) - 2
    while i >= 0:
        if all(st[i] == st[i + 1] * shp[i + 1] for st in sts):
            shp[i] *= shp[i + 1]
            del shp[i + 1]
            for st in sts:
                st[i] = st[i + 1]
                del st[i + 1]
        i -= 1
    if not shp:
        return (1,), [(0,) for _ in stride_lists]
    return tuple(shp), [tuple(st) for st in sts]


def layouts(shape, stride_lists):
    """Packed layouts of several operands over one iteration shape, after merging dims."""
    shp, sts = collapse(shape, stride_lists)
    return [abi.layout(shp, st) for st in sts]


def fn(module, name):
    return loader.function(module, name)


def launch(module, name, grid, block, params, shared=0):
    loader.launch(fn(module, name), grid, block, params, shared)


def not_implemented(name, why=""):
    """A kernel stub for ops without a CUDA kernel yet: raises, never pretends."""

    def stub(node, inputs, outputs, *args):
        raise NotImplementedError(
            f"op {name!r} has no CUDA kernel yet{': ' + why if why else ''}; run it on the CPU (`.cpu()`)"
        )

    stub.__name__ = f"cuda_stub_{name}"
    stub.cuda_stub = True
    return stub


# ---- scratch memory and the error flag -----------------------------------------------------------------------


def scratch(nbytes):
    """A transient device block for a kernel's temporaries (freed when the returned storage dies; stream order
    makes reuse by later kernels safe). While a CUDA graph is captured: memory the graph holds, since each
    replay writes the same addresses again (graphs.py)."""
    cap = graphs.active()
    if cap is not None:
        return cap.new(nbytes)
    return memory.transient_arena().new(max(int(nbytes), 1))


class Operand:
    """A device view: address, shape, strides (elements) and dtype code; `keep` holds scratch alive."""

    __slots__ = ("addr", "shape", "strides", "code", "keep")

    def __init__(self, addr_, shape, strides, code, keep=None):
        self.addr, self.shape, self.strides, self.code, self.keep = (
            addr_,
            tuple(shape),
            tuple(strides),
            code,
            keep,
        )


def operand(t):
    return Operand(addr(t), t._shape, t._strides, t.dtype.code)


def copy_raw(src, dst_addr, dst_strides, dst_code):
    """Strided copy (and cast) of operand `src` into memory at dst_addr with dst_strides over src's shape."""
    n = prod(src.shape)
    if n == 0:
        return
    lx, lo = layouts(src.shape, [src.strides, dst_strides])
    p = Params().ptr(src.addr).raw(lx).ptr(dst_addr).raw(lo).i64(n)
    launch("elementwise", f"copy_{SUF[src.code]}_{SUF[dst_code]}", grid1(n), (BLOCK,), p)


def contiguous(op_, code=None):
    """`op_` as a contiguous operand of dtype `code` (a scratch copy when it is not one already)."""
    code = op_.code if code is None else code
    cs = contiguous_strides(op_.shape)
    if code == op_.code and (op_.strides == cs or prod(op_.shape) <= 1):
        return op_
    st = scratch(prod(op_.shape) * ITEMSIZE[code])
    copy_raw(op_, st.address, cs, code)
    return Operand(st.address, op_.shape, cs, code, st)


def as_code(op_, code):
    """`op_` in dtype `code`, keeping its strides when no cast is needed."""
    return op_ if op_.code == code else contiguous(op_, code)


_err_state = {}


def _err_buffer():
    buf = _err_state.get("buf")
    if buf is None:
        buf = _err_state["buf"] = memory.persistent_arena().new(32)
    return buf


class checked:
    """``with checked(fmt) as err:`` zeroes the device error flag, gives its address to the launches inside, and
    on exit reads it back and raises the error the kernel flagged. `fmt(code, value, bound, pos)` returns the
    exception to raise (None: use the default message)."""

    def __init__(self, fmt=None):
        self.fmt = fmt

    def __enter__(self):
        cap = graphs.active()
        # in a CUDA graph each checking launch has a flag of its own, read after every graph launch
        self._capturing = cap is not None
        buf = cap.error_flag(self) if self._capturing else _err_buffer()
        memory.memset(buf.address, 0, 32)
        return buf.address

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or self._capturing:
            return False
        err = flagged_error(memory.to_host(_err_buffer(), (4,), np.int64), self.fmt)
        if err is not None:
            raise err
        return False


def fill_zero(t):
    """Zero a contiguous output."""
    if t.numel():
        memory.memset(addr(t), 0, t.numel() * t.dtype.itemsize)


def fill_value(address, shape, strides, code, value):
    """Set every element of a strided region to `value`."""
    n = prod(shape)
    if n == 0:
        return
    item = ITEMSIZE[code]
    bits = np.array([value], dtype=NP_DTYPE[code]).view({1: np.uint8, 4: np.uint32, 8: np.uint64}[item])[0]
    (lo,) = layouts(shape, [strides])
    p = Params().ptr(address).raw(lo).i64(n)
    p.put(np.array([bits]).tobytes(), item)
    launch("elementwise", f"fill_b{item}", grid1(n), (BLOCK,), p)


# ---- movement and shape ops ---------------------------------------------------------------------------------


def copy(node, inputs, outputs):
    """Materialize (and cast) a strided input into a contiguous output."""
    x, out = inputs[0], outputs[0]
    copy_raw(operand(x), addr(out), out._strides, out.dtype.code)


def function_outputs(node, inputs, outputs):
    """A custom autograd.Function's node (autograd/function.py): its inputs end with the forward's results, each
    copied into the matching output."""
    base = len(inputs) - len(outputs)
    for j, out in enumerate(outputs):
        copy(node, (inputs[base + j],), (out,))


def view(node, inputs, outputs):
    """Views share the input's storage: only shape, strides and offset change (device-independent)."""
    x = inputs[0]
    strides, offset = node.args[-2], node.args[-1]
    return x._storage, strides, x._offset + offset


def _window(shape, dims_map, base):
    est = contiguous_strides(shape)
    strides = tuple(sum(c * est[d] for d, c in m) for m in dims_map)
    off = sum(b * est[d] for d, b in enumerate(base))
    return strides, off


def strided_scatter(node, inputs, outputs):
    _, dims_map, base, fill = node.args
    out, g = outputs[0], inputs[0]
    code = out.dtype.code
    fill_value(addr(out), out._shape, out._strides, code, fill)
    if g.numel() == 0 or out.numel() == 0:
        return
    strides, off = _window(out._shape, dims_map, base)
    copy_raw(operand(g), addr(out) + off * out.dtype.itemsize, strides, code)


def cat(node, inputs, outputs):
    (dim,) = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    d = dim % len(out._shape)
    start = 0
    for t in inputs:
        if t.numel():
            copy_raw(
                operand(t),
                addr(out) + start * out._strides[d] * out.dtype.itemsize,
                out._strides,
                out.dtype.code,
            )
        start += t._shape[d] if len(t._shape) == len(out._shape) else 0


def split_copy(node, inputs, outputs):
    """The CPU kernel's pieces (kernels/cpu/kernels_indexing.py split_copy), each one strided copy."""
    (dim,) = node.args
    x = inputs[0]
    start = 0
    for o in outputs:
        n = o._shape[dim]
        if n and o.numel():
            piece = Operand(
                addr(x) + start * x._strides[dim] * x.dtype.itemsize, o._shape, x._strides, x.dtype.code
            )
            copy_raw(piece, addr(o), o._strides, o.dtype.code)
        start += n


def flip(node, inputs, outputs):
    (dims,) = node.args
    x, out = inputs[0], outputs[0]
    if out.numel() == 0:
        return
    nd = len(x._shape)
    strides = list(x._strides)
    a = addr(x)
    for d in dims:
        d %= nd
        a += (x._shape[d] - 1) * strides[d] * x.dtype.itemsize
        strides[d] = -strides[d]
    copy_raw(Operand(a, x._shape, strides, x.dtype.code), addr(out), out._strides, out.dtype.code)


def tril(node, inputs, outputs):
    (k,) = node.args
    x, out = inputs[0], outputs[0]
    n = out.numel()
    if n == 0:
        return
    shape = x._shape
    (lx,) = layouts(shape, [x._strides])
    p = Params().ptr(addr(x)).raw(lx).ptr(addr(out)).i64(n).i64(shape[-2]).i64(shape[-1]).i64(k)
    p.i32(1 if node.op.name == "triu" else 0)
    launch("elementwise", f"tril_{SUF[x.dtype.code]}", grid1(n), (BLOCK,), p)


# ---- pointwise ----------------------------------------------------------------------------------------------

# the op codes of cu/elementwise.cu by op row (numbered once, in _core/codes.h); every name is a row of the op
# table's CUDA column (but _NO_ROW below)
BINARY_CODES = dict(codes.BINARY_CODES)
COMPARE_CODES = dict(codes.COMPARE_CODES)
# round_decimals (round with decimals != 0) is the .cu kernel's round with its `decimals` argument
UNARY_CODES = dict(
    codes.UNARY_CODES,
    reduce_safe_sqrt=codes.UNARY_CODES["sqrt"],
    round_decimals=codes.UNARY_CODES["round"],
)
PREDICATE_CODES = {
    name: codes.PREDICATE_CODES[name] for name in ("isfinite", "isnan", "isinf", "logical_not")
}
# the integer divisions, which report a zero divisor through the error flag
_INT_DIVISIONS = tuple(codes.BINARY_CODES[n] for n in ("floor_divide", "remainder", "fmod"))


def binary_raw(opcode, a, b, out_addr, out_shape, out_strides, code, err=0):
    """out = a (op) b with broadcasting; a and b are operands already in dtype `code`."""
    n = prod(out_shape)
    la, lb, lo = layouts(out_shape, [_bstrides(a, out_shape), _bstrides(b, out_shape), out_strides])
    p = Params().i32(opcode).ptr(a.addr).raw(la).ptr(b.addr).raw(lb).ptr(out_addr).raw(lo).i64(n).ptr(err)
    launch("elementwise", f"binary_{SUF[code]}", grid1(n), (BLOCK,), p)


def _bstrides(op_, shape):
    nd, pad = len(shape), len(shape) - len(op_.shape)
    out = [0] * nd
    for i, s in enumerate(op_.shape):
        if s != 1 or shape[pad + i] == 1:
            out[pad + i] = op_.strides[i]
    return tuple(out)


def binary(node, inputs, outputs):
    """add, sub, mul, div, maximum, minimum, pow, floor_divide, remainder, fmod, atan2, copysign, nextafter and
    the bitwise ops."""
    out = outputs[0]
    if out.numel() == 0:
        return
    name = node.op.name
    code = out.dtype.code
    a, b = (as_code(operand(t), code) for t in inputs)
    opcode = BINARY_CODES[name]
    if code in (I32, I64) and opcode in _INT_DIVISIONS:
        with checked(lambda *e: ZeroDivisionError(f"{name}: integer division by zero")) as err:
            binary_raw(opcode, a, b, addr(out), out._shape, out._strides, code, err)
    else:
        binary_raw(opcode, a, b, addr(out), out._shape, out._strides, code)


def compare(node, inputs, outputs):
    """eq, ne, lt, le, gt, ge, logical_and/or/xor: bool out; inputs promoted to a common dtype."""
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    code = max(t.dtype.code for t in inputs)
    a, b = (as_code(operand(t), code) for t in inputs)
    shape = out._shape
    la, lb, lo = layouts(shape, [_bstrides(a, shape), _bstrides(b, shape), out._strides])
    p = (
        Params()
        .i32(COMPARE_CODES[node.op.name])
        .ptr(a.addr)
        .raw(la)
        .ptr(b.addr)
        .raw(lb)
        .ptr(addr(out))
        .raw(lo)
    )
    p.i64(n)
    launch("elementwise", f"compare_{SUF[code]}", grid1(n), (BLOCK,), p)


def unary_raw(opcode, x, out_addr, out_strides, decimals=0):
    n = prod(x.shape)
    if n == 0:
        return
    lx, lo = layouts(x.shape, [x.strides, out_strides])
    p = Params().i32(opcode).ptr(x.addr).raw(lx).ptr(out_addr).raw(lo).i64(n).i32(decimals)
    launch("elementwise", f"unary_{SUF[x.code]}", grid1(n), (BLOCK,), p)


def unary(node, inputs, outputs):
    """exp, log, ..., relu, erf, rounding (round takes `decimals`), bitwise_not: out dtype = input dtype."""
    out = outputs[0]
    x = as_code(operand(inputs[0]), out.dtype.code)
    decimals = int(node.args[0]) if node.op.name == "round_decimals" else 0
    unary_raw(UNARY_CODES[node.op.name], x, addr(out), out._strides, decimals)


def predicate(node, inputs, outputs):
    """isfinite, isnan, isinf, logical_not: bool out."""
    x, out = operand(inputs[0]), outputs[0]
    n = out.numel()
    if n == 0:
        return
    lx, lo = layouts(x.shape, [x.strides, out._strides])
    p = Params().i32(PREDICATE_CODES[node.op.name]).ptr(x.addr).raw(lx).ptr(addr(out)).raw(lo).i64(n)
    launch("elementwise", f"predicate_{SUF[x.code]}", grid1(n), (BLOCK,), p)


def where(node, inputs, outputs):
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    code = out.dtype.code
    c = as_code(operand(inputs[0]), BOOL)
    a, b = (as_code(operand(t), code) for t in inputs[1:])
    shape = out._shape
    lc, la, lb, lo = layouts(
        shape, [_bstrides(c, shape), _bstrides(a, shape), _bstrides(b, shape), out._strides]
    )
    p = Params().ptr(c.addr).raw(lc).ptr(a.addr).raw(la).ptr(b.addr).raw(lb).ptr(addr(out)).raw(lo).i64(n)
    launch("elementwise", f"where_{SUF[code]}", grid1(n), (BLOCK,), p)


def clamp(node, inputs, outputs):
    has_min, has_max = node.args
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    code = out.dtype.code
    ops = [as_code(operand(t), code) for t in inputs]
    x = ops[0]
    mn = ops[1] if has_min else None
    mx = ops[1 + bool(has_min)] if has_max else None
    shape = out._shape
    none = Operand(0, (), (), code)
    lx, lmn, lmx, lo = layouts(
        shape, [_bstrides(x, shape), _bstrides(mn or none, shape), _bstrides(mx or none, shape), out._strides]
    )
    p = Params().ptr(x.addr).raw(lx).ptr(mn.addr if mn else 0).raw(lmn).ptr(mx.addr if mx else 0).raw(lmx)
    p.ptr(addr(out)).raw(lo).i64(n)
    launch("elementwise", f"clamp_{SUF[code]}", grid1(n), (BLOCK,), p)


def dropout_mask(node, inputs, outputs):
    (p_drop,) = node.args
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    if p_drop >= 1:
        fill_zero(out)
        return
    code = out.dtype.code
    u = contiguous(operand(inputs[0]), code)
    p = Params().ptr(u.addr).ptr(addr(out)).i64(n).scalar(code, p_drop).scalar(code, 1.0 / (1.0 - p_drop))
    launch("elementwise", f"dropout_mask_{SUF[code]}", grid1(n), (BLOCK,), p)


def bool_mask_to_additive(node, inputs, outputs):
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    m = as_code(operand(inputs[0]), BOOL)
    (lm,) = layouts(m.shape, [m.strides])
    p = Params().ptr(m.addr).raw(lm).ptr(addr(out)).i64(n)
    launch("elementwise", f"mask_to_additive_{SUF[out.dtype.code]}", grid1(n), (BLOCK,), p)


# ---- indexing -----------------------------------------------------------------------------------------------


def _index_dtype(t):
    if t.dtype.code not in (I32, I64):
        raise NotImplementedError(f"CUDA indexing takes int32/int64 index tensors, got {t.dtype}")
    return t.dtype.code == I64


def _broadcast(shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, v in enumerate(s):
            j = nd - len(s) + i
            if v != 1:
                out[j] = v
    return tuple(out)


def _adv_plan(vshape, vstrides, adv_pos, idx):
    """Iteration shape of ``v[..., idx0, ..., idx1, ...]`` (numpy's rules), the strides of `v` over it (0 on the
    index dims) and, per index tensor, its strides over it plus (size, stride) of the dim it indexes."""
    bshape = _broadcast([t._shape for t in idx])
    nb = len(bshape)
    rest = [d for d in range(len(vshape)) if d not in adv_pos]
    adjacent = list(adv_pos) == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    if adjacent:
        before = [d for d in rest if d < adv_pos[0]]
        after = [d for d in rest if d > adv_pos[-1]]
        dims = [("v", d) for d in before] + [("b", i) for i in range(nb)] + [("v", d) for d in after]
    else:
        dims = [("b", i) for i in range(nb)] + [("v", d) for d in rest]
    shape = tuple(vshape[x] if kind == "v" else bshape[x] for kind, x in dims)
    v_st = tuple(vstrides[x] if kind == "v" else 0 for kind, x in dims)
    per_idx = []
    for t, p in zip(idx, adv_pos):
        tb = _bstrides(operand(t), bshape)
        st = tuple(tb[x] if kind == "b" else 0 for kind, x in dims)
        per_idx.append((t, st, vshape[p], vstrides[p]))
    return shape, v_st, per_idx


def _indices(shape, base_strides, per_idx, wrap, extra_strides=()):
    """Packed Indices plus the layouts of the base operand(s) over `shape`, all collapsed together."""
    lists = [base_strides, *extra_strides] + [st for _, st, _, _ in per_idx]
    shp, sts = collapse(shape, lists)
    nbase = 1 + len(extra_strides)
    base_layouts = [abi.layout(shp, st) for st in sts[:nbase]]
    args = [
        abi.index_arg(addr(t), _index_dtype(t), size, stride, abi.layout(shp, st))
        for (t, _, size, stride), st in zip(per_idx, sts[nbase:])
    ]
    return base_layouts, abi.indices(args, wrap)


def _index_error(code, value, bound, pos):
    if code == codes.ERROR_CODES["index"]:
        return IndexError(f"index {value} is out of bounds for a dimension with size {bound}")
    return None


def gather_raw(x_addr, code, shape, x_strides, per_idx, wrap, out_addr):
    n = prod(shape)
    if n == 0:
        return
    (lx,), ix = _indices(shape, x_strides, per_idx, wrap)
    with checked(_index_error) as err:
        p = Params().ptr(x_addr).raw(lx).raw(ix).ptr(out_addr).i64(n).ptr(err)
        launch("index", f"gather_{SUF[code]}", grid1(n), (BLOCK,), p)


def scatter_raw(src, shape, out_addr, out_strides, per_idx, wrap, accumulate, code):
    n = prod(shape)
    if n == 0:
        return
    (ls, lo), ix = _indices(shape, _bstrides(src, shape), per_idx, wrap, extra_strides=(out_strides,))
    with checked(_index_error) as err:
        if code == BOOL:
            if accumulate:
                raise NotImplementedError("CUDA index accumulation into bool tensors")
            p = Params().ptr(src.addr).raw(ls).raw(ix).ptr(out_addr).raw(lo).i64(n).ptr(err)
            launch("index", "scatter_store_u8", grid1(n), (BLOCK,), p)
        else:
            p = (
                Params()
                .ptr(src.addr)
                .raw(ls)
                .raw(ix)
                .ptr(out_addr)
                .raw(lo)
                .i64(n)
                .i32(1 if accumulate else 0)
            )
            p.ptr(err)
            launch("index", f"scatter_{SUF[code]}", grid1(n), (BLOCK,), p)


def index(node, inputs, outputs):
    """x[..., i0, ..., i1, ...] with up to 4 index tensors (numpy's rules for where the index dims go)."""
    adv_pos, wrap = node.args
    x, idx, out = inputs[0], inputs[1:], outputs[0]
    shape, x_st, per_idx = _adv_plan(x._shape, x._strides, adv_pos, idx)
    gather_raw(addr(x), x.dtype.code, shape, x_st, per_idx, wrap, addr(out))


def index_backward(node, inputs, outputs):
    """Zeros of the indexed tensor's shape with g added at the indexed positions (repeats accumulate)."""
    _, adv_pos, wrap = node.args
    g, idx, out = inputs[0], inputs[1:], outputs[0]
    fill_zero(out)
    shape, o_st, per_idx = _adv_plan(out._shape, out._strides, adv_pos, idx)
    scatter_raw(operand(g), shape, addr(out), o_st, per_idx, wrap, True, out.dtype.code)


def index_put(node, inputs, outputs):
    """out = old, with `values` written (or added) at a strided window and index tensors inside it."""
    vshape, dims_map, base, adv_pos, wrap, accumulate = node.args
    old, values, idx, out = inputs[0], inputs[1], inputs[2:], outputs[0]
    code = out.dtype.code
    if out.numel():
        copy_raw(operand(old), addr(out), out._strides, code)
    if out.numel() == 0 or values.numel() == 0:
        return
    w_strides, w_off = _window(out._shape, dims_map, base)
    w_addr = addr(out) + w_off * out.dtype.itemsize
    vals = as_code(operand(values), code)
    if not adv_pos:
        win = Operand(w_addr, vshape, w_strides, code)
        if accumulate:
            binary_raw(BINARY_CODES["add"], win, vals, w_addr, tuple(vshape), w_strides, code)
        else:
            copy_raw(
                Operand(vals.addr, vshape, _bstrides(vals, tuple(vshape)), code), w_addr, w_strides, code
            )
        return
    shape, o_st, per_idx = _adv_plan(tuple(vshape), w_strides, adv_pos, idx)
    scatter_raw(vals, shape, w_addr, o_st, per_idx, wrap, accumulate, code)


def take_along(node, inputs, outputs):
    """out = x gathered along `dim` at idx (idx has the output's shape)."""
    (dim,) = node.args
    x, idx, out = inputs[0], inputs[1], outputs[0]
    d = dim % max(len(x._shape), 1)
    shape = out._shape
    x_st = tuple(0 if i == d else (x._strides[i] if x._shape[i] != 1 else 0) for i in range(len(shape)))
    per_idx = [
        (
            idx,
            idx._strides if len(idx._shape) else (),
            x._shape[d] if x._shape else 1,
            x._strides[d] if x._shape else 0,
        )
    ]
    gather_raw(addr(x), x.dtype.code, shape, x_st, per_idx, False, addr(out))


def put_along(node, inputs, outputs):
    """Zeros of the output's shape with g written at idx along `dim`."""
    dim, _shape = node.args
    g, idx, out = inputs[0], inputs[1], outputs[0]
    fill_zero(out)
    if out.numel() == 0:
        return
    d = dim % max(len(out._shape), 1)
    shape = idx._shape
    o_st = tuple(0 if i == d else out._strides[i] for i in range(len(shape)))
    per_idx = [(idx, idx._strides, out._shape[d], out._strides[d])]
    scatter_raw(operand(g), shape, addr(out), o_st, per_idx, False, False, out.dtype.code)


# ---- reductions ---------------------------------------------------------------------------------------------

REDUCE_CODES = {name: codes.REDUCE_OP_CODES[name] for name in ("sum", "prod", "amax", "amin", "all", "any")}
REDUCE_PAIRS = {(3, 3), (4, 4), (1, 1), (2, 2), (1, 2), (0, 2), (0, 0), (1, 0), (2, 0), (3, 0), (4, 0)}


def _split_dims(shape, strides, dims):
    nd = len(shape)
    red = sorted({d % nd for d in dims}) if nd else []
    keep = [d for d in range(nd) if d not in red]
    ks, kst = tuple(shape[d] for d in keep), tuple(strides[d] for d in keep)
    rs, rst = tuple(shape[d] for d in red), tuple(strides[d] for d in red)
    return ks, kst, rs, rst


def reduce_raw(opcode, x, dims, out_addr, out_code, p_norm=2.0):
    """Reduce operand x over `dims` into a contiguous output (the kept dims in order)."""
    if dims is None:
        dims = tuple(range(len(x.shape)))
    ks, kst, rs, rst = _split_dims(x.shape, x.strides, dims)
    n_out, R = prod(ks), prod(rs)
    if n_out == 0:
        return
    if (x.code, out_code) not in REDUCE_PAIRS:
        x = as_code(x, out_code)
        ks, kst, rs, rst = _split_dims(x.shape, x.strides, dims)
    (lk,) = layouts(ks, [kst])
    (lr,) = layouts(rs, [rst])
    name = f"{SUF[x.code]}_{SUF[out_code]}"
    p = Params().i32(opcode).ptr(x.addr).raw(lk).raw(lr).i64(R).ptr(out_addr).i64(n_out).f64(p_norm)
    if R >= 1024 and n_out < 1024:
        launch("reduce", f"reduce_block_{name}", (min(n_out, MAX_GRID),), (BLOCK,), p)
    else:
        launch("reduce", f"reduce_warp_{name}", grid1(n_out * 32), (BLOCK,), p)


def reduce(node, inputs, outputs):
    """sum, prod, amax, amin, all, any over `dims` (args: dims, keepdim)."""
    dims = node.args[0]
    if dims is not None and not isinstance(dims, (tuple, list)):
        dims = (dims,)
    x, out = operand(inputs[0]), outputs[0]
    reduce_raw(REDUCE_CODES[node.op.name], x, dims, addr(out), out.dtype.code)


def norm(node, inputs, outputs):
    p_norm, dims, _keepdim = node.args
    x, out = operand(inputs[0]), outputs[0]
    opcode = codes.REDUCE_OP_CODES["norm_2" if p_norm == 2.0 else "norm_p"]
    reduce_raw(opcode, x, dims, addr(out), out.dtype.code, float(p_norm))


def argminmax(node, inputs, outputs):
    dim, _keepdim = node.args
    x, out = operand(inputs[0]), outputs[0]
    if out.numel() == 0:
        return
    if x.code == BOOL:
        x = as_code(x, I32)
    if dim is None or not x.shape:
        x = contiguous(x)
        lk, R, rs, n_out = abi.layout((1,), (0,)), max(prod(x.shape), 1), 1, 1
    else:
        d = dim % len(x.shape)
        ks, kst, _, _ = _split_dims(x.shape, x.strides, (d,))
        (lk,) = layouts(ks, [kst])
        R, rs, n_out = x.shape[d], x.strides[d], prod(ks)
    p = Params().i32(1 if node.op.name == "argmax" else 0).ptr(x.addr).raw(lk).i64(R).i64(rs).ptr(addr(out))
    p.i64(n_out)
    launch("reduce", f"argreduce_{SUF[x.code]}", grid1(n_out * 32), (BLOCK,), p)


def logsumexp(node, inputs, outputs):
    dims, _keepdim = node.args
    out = outputs[0]
    x = as_code(operand(inputs[0]), out.dtype.code)
    if dims is None:
        dims = tuple(range(len(x.shape)))
    ks, kst, rs, rst = _split_dims(x.shape, x.strides, dims)
    n_out = prod(ks)
    if n_out == 0:
        return
    (lk,) = layouts(ks, [kst])
    (lr,) = layouts(rs, [rst])
    p = Params().ptr(x.addr).raw(lk).raw(lr).i64(prod(rs)).ptr(addr(out)).i64(n_out)
    launch("reduce", f"logsumexp_{SUF[x.code]}", grid1(n_out * 32), (BLOCK,), p)


def _float_dtype(t, what):
    if t.dtype.code not in (F32, F64):
        raise NotImplementedError(f"CUDA {what} runs on float32/float64 tensors, got {t.dtype}")
    return t.dtype.code


def tie_weights(node, inputs, outputs):
    """reduce_tie_weights (max/amax backward): 1/count at the positions equal to their slice's extreme."""
    (dims,) = node.args
    out = outputs[0]
    code = _float_dtype(out, "max/min backward")
    if out.numel() == 0:
        return
    x, m = as_code(operand(inputs[0]), code), as_code(operand(inputs[1]), code)
    if dims is None:
        dims = tuple(range(len(x.shape)))
    ks, kst, rs, rst = _split_dims(x.shape, x.strides, dims)
    mkst = _split_dims(m.shape, m.strides, dims)[1]
    _, okst, _, orst = _split_dims(out._shape, out._strides, dims)
    lk, lm, lok = layouts(ks, [kst, mkst, okst])
    lr, lor = layouts(rs, [rst, orst])
    n_out = prod(ks)
    p = (
        Params()
        .ptr(x.addr)
        .raw(lk)
        .raw(lr)
        .i64(prod(rs))
        .ptr(m.addr)
        .raw(lm)
        .ptr(addr(out))
        .raw(lok)
        .raw(lor)
    )
    p.i64(n_out)
    launch("reduce", f"tie_weights_{SUF[code]}", grid1(n_out * 32), (BLOCK,), p)


def _rows(shape, strides, dim):
    """(row shape, row strides, stride along dim) of a strided operand split at `dim`."""
    return (
        tuple(s for i, s in enumerate(shape) if i != dim),
        tuple(st for i, st in enumerate(strides) if i != dim),
        strides[dim],
    )


def prod_others(node, inputs, outputs):
    """reduce_prod_others (prod backward) and reduce_prod_others_bw (its derivative), along one dim."""
    (dim,) = node.args
    out = outputs[0]
    code = _float_dtype(out, "prod backward")
    if out.numel() == 0:
        return
    x = as_code(operand(inputs[0]), code)
    dim %= len(x.shape)
    rshape, xrst, xs = _rows(x.shape, x.strides, dim)
    _, orst, os_ = _rows(out._shape, out._strides, dim)
    length, n_rows = x.shape[dim], prod(rshape)
    if len(inputs) == 1:
        lx, lo = layouts(rshape, [xrst, orst])
        p = Params().ptr(x.addr).raw(lx).i64(xs).ptr(addr(out)).raw(lo).i64(os_).i64(length).i64(n_rows)
        launch("reduce", f"prod_others_{SUF[code]}", grid1(n_rows), (BLOCK,), p)
        return
    g = as_code(operand(inputs[1]), code)
    _, grst, gs = _rows(x.shape, _bstrides(g, x.shape), dim)
    lx, lg, lo = layouts(rshape, [xrst, grst, orst])
    left = scratch(out.numel() * ITEMSIZE[code])
    p = Params().ptr(x.addr).raw(lx).i64(xs).ptr(g.addr).raw(lg).i64(gs).ptr(addr(out)).raw(lo).i64(os_)
    p.ptr(left.address).i64(length).i64(n_rows)
    launch("reduce", f"prod_others_bw_{SUF[code]}", grid1(n_rows), (BLOCK,), p)


CUMSUM_PAIRS = {(3, 3), (4, 4), (1, 2), (2, 2), (0, 2)}


def cumsum(node, inputs, outputs):
    dim, reverse = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    x = operand(inputs[0])
    oc = out.dtype.code
    if (x.code, oc) not in CUMSUM_PAIRS:
        x = as_code(x, oc)
    shape = x.shape if x.shape else (1,)
    xst = x.strides if x.shape else (0,)
    ost = out._strides if out._shape else (1,)
    d = dim % len(shape)
    ks, kst, _, _ = _split_dims(shape, xst, (d,))
    _, ost_k, _, _ = _split_dims(shape, ost, (d,))
    lrow, orow = layouts(ks, [kst, ost_k])
    n_rows = prod(ks)
    p = Params().ptr(x.addr).raw(lrow).i64(shape[d]).i64(xst[d]).ptr(addr(out)).raw(orow).i64(ost[d])
    p.i64(n_rows).i32(1 if reverse else 0)
    launch(
        "reduce", f"cumsum_{SUF[x.code]}_{SUF[oc]}", (min(n_rows, MAX_GRID),), (pow2_at_least(shape[d]),), p
    )


# ---- sorting ------------------------------------------------------------------------------------------------

SORT_SMEM_MAX = 2048


def sort_raw(x, dim, descending, k, out):
    """Indices of the first k elements of each row of operand x along `dim`, in sorted order, into `out`."""
    sort_into(x, dim, descending, k, addr(out), out._shape, out._strides)


def sort_into(x, dim, descending, k, out_addr, out_shape, out_strides):
    """sort_raw into int64 memory at out_addr with out_shape / out_strides (scratch needs no tensor)."""
    if prod(out_shape) == 0:
        return
    if x.code == BOOL:
        x = as_code(x, I32)
    shape = x.shape if x.shape else (1,)
    xst = x.strides if x.shape else (0,)
    ost = out_strides if out_shape else (1,)
    d = dim % len(shape)
    length = shape[d]
    ks, kst, _, _ = _split_dims(shape, xst, (d,))
    _, ost_k, _, _ = _split_dims(shape, ost, (d,))
    lrow, orow = layouts(ks, [kst, ost_k])
    rows = prod(ks)
    n2 = 1
    while n2 < length:
        n2 *= 2
    suf = SUF[x.code]
    desc = 1 if descending else 0
    if n2 <= SORT_SMEM_MAX:
        p = Params().ptr(x.addr).raw(lrow).i64(length).i64(xst[d]).i64(n2).ptr(out_addr).raw(orow).i64(ost[d])
        p.i64(k).i64(rows).i32(desc)
        launch("sort", f"sort_rows_smem_{suf}", (min(rows, MAX_GRID),), (min(1024, max(32, n2 // 2)),), p)
        return
    keys = scratch(rows * n2 * ITEMSIZE[x.code])
    ids = scratch(rows * n2 * 8)
    total = rows * n2
    p = Params().ptr(x.addr).raw(lrow).i64(length).i64(xst[d]).i64(n2).i64(rows).ptr(keys.address)
    p.ptr(ids.address)
    launch("sort", f"sort_init_{suf}", grid1(total), (BLOCK,), p)
    size = 2
    while size <= n2:
        stride = size // 2
        while stride > 0:
            p = Params().ptr(keys.address).ptr(ids.address).i64(n2).i64(rows).i64(size).i64(stride).i32(desc)
            launch("sort", f"sort_step_{suf}", grid1(total), (BLOCK,), p)
            stride //= 2
        size *= 2
    p = Params().ptr(ids.address).i64(n2).i64(rows).i64(k).ptr(out_addr).raw(orow).i64(ost[d])
    launch("sort", "sort_write", grid1(rows * k), (BLOCK,), p)


def argsort(node, inputs, outputs):
    dim, descending = node.args
    x = operand(inputs[0])
    length = x.shape[dim % len(x.shape)] if x.shape else 1
    sort_raw(x, dim, descending, length, outputs[0])


def topk(node, inputs, outputs):
    k, dim, largest = node.args
    sort_raw(operand(inputs[0]), dim, largest, k, outputs[0])


def frexp(node, inputs, outputs):
    """x = mantissa * 2^exponent: the mantissa in x's float dtype, the exponent int32."""
    m, e = outputs
    n = m.numel()
    if n == 0:
        return
    x = operand(inputs[0])
    lx, lm, le = layouts(x.shape, [x.strides, m._strides, e._strides])
    p = Params().ptr(x.addr).raw(lx).ptr(addr(m)).raw(lm).ptr(addr(e)).raw(le).i64(n)
    launch("elementwise", f"frexp_{SUF[x.code]}", grid1(n), (BLOCK,), p)


# ---- registration -------------------------------------------------------------------------------------------

POINTWISE = {
    "cast": copy, "copy": copy, "view": view, "expand": view, "permute": view, "strided_view": view,
    "strided_scatter": strided_scatter, "cat": cat, "split_copy": split_copy, "tril": tril, "triu": tril, "flip": flip,
    "where": where, "clamp": clamp, "dropout_mask": dropout_mask, "bool_mask_to_additive": bool_mask_to_additive,
    "index": index, "index_backward": index_backward, "index_put": index_put,
    "reduce_take_along": take_along, "reduce_put_along": put_along,
    "sum": reduce, "prod": reduce, "amax": reduce, "amin": reduce, "all": reduce, "any": reduce, "norm": norm,
    "argmax": argminmax, "argmin": argminmax, "logsumexp": logsumexp, "cumsum": cumsum,
    "argsort": argsort, "topk": topk, "autograd_function": function_outputs, "frexp": frexp,
    "reduce_tie_weights": tie_weights, "reduce_prod_others": prod_others, "reduce_prod_others_bw": prod_others,
    # a copy whose backward rule raises (scatter_reduce's unsupported double backward)
    "scatter_reduce_double_backward_error": copy,
}  # fmt: skip
POINTWISE.update({name: binary for name in BINARY_CODES})
POINTWISE.update({name: compare for name in COMPARE_CODES})
# opcodes of the .cu unary kernel that no op row has (plast composes neg, silu, reciprocal, rsqrt and square from
# other ops): not in the op table's CUDA column
_NO_ROW = {"neg", "silu", "reciprocal", "rsqrt", "square"}
POINTWISE.update({name: unary for name in UNARY_CODES if name not in _NO_ROW})
POINTWISE.update({name: predicate for name in PREDICATE_CODES})

# ops with no CUDA kernel yet, and why (each gets a stub that raises NotImplementedError)
STUBS = {
    "flash_attention_masked": "the key-masked attention kernel is the CPU's; on CUDA scaled_dot_product_attention "
    "takes a padding mask through its composite (ops/attention.py _flash_fits), so this row is never recorded",
}
