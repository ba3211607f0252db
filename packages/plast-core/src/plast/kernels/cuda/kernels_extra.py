"""Launchers for the last rows of the op table's "cuda" column: scatter_reduce, reduce_prod_excl (prod's third
and higher derivatives), multinomial and reduce_svd. Same contract and helpers as kernels.py; the kernels are in
kernels/scatter_reduce.cu, prod_excl.cu, multinomial.cu and svd.cu, their arithmetic in the .cuh headers next to
them (which the tests also compile for the host against the CPU backend).

Importable without pycuda.
"""

import numpy as np

from ..._core.codes import ERROR_CODES, MULTINOMIAL_ERROR_CODES, SCATTER_REDUCE_CODES
from ...memory import cuda as memory
from ..cpu.kernels import np_view
from .abi import Params
from .kernels import (
    BLOCK,
    F32,
    F64,
    ITEMSIZE,
    MAX_GRID,
    NP_DTYPE,
    SUF,
    Operand,
    _bstrides,
    _float_dtype,
    _index_dtype,
    _rows,
    addr,
    as_code,
    checked,
    contiguous,
    contiguous_strides,
    copy_raw,
    grid1,
    launch,
    layouts,
    operand,
    pow2_at_least,
    prod,
    scratch,
    sort_into,
    sort_raw,
)

# ---- scatter_reduce -----------------------------------------------------------------------------------------


def scatter_reduce(node, inputs, outputs):
    """out = x with src[i] reduced into x at index[i] along `dim` (sum, prod, mean, amax, amin; include_self or
    not). No atomics: the source elements are sorted stably by the output offset they land on and one thread
    folds each offset's run in source order (scatter_reduce.cu), so every dtype gets the CPU's result, the same
    on every run. `src` has index's shape (the op layer narrowed it)."""
    dim, reduce, include_self = node.args
    x, index, src = inputs
    out = outputs[0]
    code = out.dtype.code
    if out.numel() == 0:
        return
    copy_raw(operand(x), addr(out), out._strides, code)
    n = index.numel()
    if n == 0:
        return
    i64 = _index_dtype(index)
    shape = tuple(index._shape) or (1,)
    d = dim % len(shape)
    size, od = (out._shape[d], out._strides[d]) if out._shape else (1, 0)
    s = as_code(operand(src), code)
    o_st = tuple(0 if i == d else out._strides[i] for i in range(len(out._shape)))
    lidx, lsrc, lout = layouts(shape, [index._strides or (0,), s.strides or (0,), o_st or (0,)])
    keys = scratch(n * 8)

    def bad_index(code_, value, bound, pos):
        if code_ == ERROR_CODES["index"]:
            return IndexError(f"index {value} is out of bounds for dimension {d} with size {bound}")
        return None

    with checked(bad_index) as err:
        p = Params().ptr(addr(index)).i32(1 if i64 else 0).raw(lidx).raw(lout).i64(size).i64(od).i64(n)
        p.ptr(keys.address).ptr(err)
        launch("scatter_reduce", "scatter_reduce_keys", grid1(n), (BLOCK,), p)
    order = scratch(n * 8)
    sort_into(Operand(keys.address, (n,), (1,), 2), 0, False, n, order.address, (n,), (1,))
    p = Params().i32(SCATTER_REDUCE_CODES[reduce]).i32(1 if include_self else 0).ptr(s.addr).raw(lsrc)
    p.ptr(keys.address).ptr(order.address).i64(n).ptr(addr(out))
    launch("scatter_reduce", f"scatter_reduce_apply_{SUF[code]}", grid1(n), (BLOCK,), p)


# ---- prod's higher derivatives ------------------------------------------------------------------------------
# each upstream vector doubles prod_excl's per-element state (2^r coefficients): order 3 + 12 is plenty
PROD_EXCL_MAX_VECTORS = 12


def prod_excl(node, inputs, outputs):
    """reduce_prod_excl (prod's derivatives of order 3 and up) along one dim: inputs x, g_1..g_r (r >= 2). The
    g's are packed as contiguous (r, rows, len) scratch first; one thread per row (prod_excl.cu)."""
    (dim,) = node.args
    out = outputs[0]
    code = _float_dtype(out, "prod's higher derivatives")
    if out.numel() == 0:
        return
    r = len(inputs) - 1
    if r > PROD_EXCL_MAX_VECTORS:
        raise NotImplementedError(
            f"CUDA reduce_prod_excl takes at most {PROD_EXCL_MAX_VECTORS} upstream vectors (prod's derivative "
            f"of order {PROD_EXCL_MAX_VECTORS + 1}), got {r}; run it on the CPU (`.cpu()`)"
        )
    x = as_code(operand(inputs[0]), code)
    shape = x.shape or (1,)
    xst = x.strides or (0,)
    dim %= len(shape)
    rshape, xrst, xs = _rows(shape, xst, dim)
    _, orst, os_ = _rows(shape, out._strides or (1,), dim)
    length, n_rows = shape[dim], prod(rshape)
    perm = [i for i in range(len(shape)) if i != dim] + [dim]
    pshape = tuple(shape[i] for i in perm)
    item, block = ITEMSIZE[code], n_rows * length
    gs = scratch(r * block * item)
    for s, t in enumerate(inputs[1:]):
        g = as_code(operand(t), code)
        gst = _bstrides(g, shape)
        g_rows = Operand(g.addr, pshape, tuple(gst[i] for i in perm), code)
        copy_raw(g_rows, gs.address + s * block * item, contiguous_strides(pshape), code)
    pre = scratch((block << r) * item)
    suf = scratch((n_rows << r) * item)
    lx, lo = layouts(rshape, [xrst, orst])
    p = Params().ptr(x.addr).raw(lx).i64(xs).ptr(gs.address).i32(r).ptr(addr(out)).raw(lo).i64(os_)
    p.ptr(pre.address).ptr(suf.address).i64(length).i64(n_rows)
    launch("prod_excl", f"prod_excl_{SUF[code]}", grid1(n_rows), (BLOCK,), p)


# ---- multinomial --------------------------------------------------------------------------------------------

# the CPU kernel's messages (kernels/cpu/kernels_reduce.py check_weights), by the value a kernel flags
MULTINOMIAL_ERRORS = {
    MULTINOMIAL_ERROR_CODES[
        "bad_weight"
    ]: "multinomial: probability tensor contains either `inf`, `nan` or element < 0",
    MULTINOMIAL_ERROR_CODES["no_positive"]: (
        "multinomial: invalid distribution (sum of probabilities <= 0): every row needs a positive weight"
    ),
}


def _multinomial_error(code, value, bound, pos):
    if code == ERROR_CODES["value"] and value in MULTINOMIAL_ERRORS:
        return RuntimeError(MULTINOMIAL_ERRORS[value])
    return None


def _on_device(t, code):
    """t's values as a contiguous device operand of dtype `code`. A host tensor is copied over: the op layer draws
    multinomial's uniforms with a CPU generator call whatever the weights' device (the same Philox numbers the
    device would draw)."""
    dev = getattr(t, "device", "cuda")
    if str(getattr(dev, "type", dev)).startswith("cuda"):
        return contiguous(operand(t), code)

    host = np.ascontiguousarray(np_view(t), dtype=NP_DTYPE[code])
    st = scratch(host.nbytes)
    memory.from_host(st, host)
    return Operand(st.address, tuple(t._shape), contiguous_strides(t._shape), code, st)


def multinomial(node, inputs, outputs):
    """Category indices (rows, num_samples) from weights (rows, cats) and float64 uniforms u, as the CPU kernel
    draws them (multinomial.cuh): with replacement by the inverse CDF, without by the exponential race (keys
    sorted stably, descending, by sort.cu). Bad weights raise the CPU's RuntimeError."""
    num_samples, replacement = node.args
    w_t, u_t = inputs
    out = outputs[0]
    rows, cats = w_t._shape
    if out.numel() == 0:
        return
    if cats == 0:
        raise RuntimeError(MULTINOMIAL_ERRORS[MULTINOMIAL_ERROR_CODES["no_positive"]])
    w = operand(w_t)
    if w.code not in (F32, F64):
        w = as_code(w, F64)
    u = _on_device(u_t, F64)
    s0, s1 = w.strides
    suf = SUF[w.code]
    if replacement:
        cdf, last = scratch(rows * cats * 8), scratch(rows * 8)
        with checked(_multinomial_error) as err:
            p = Params().ptr(w.addr).i64(s0).i64(s1).i64(rows).i64(cats).ptr(cdf.address).ptr(last.address)
            launch("multinomial", f"multinomial_cdf_{suf}", grid1(rows), (BLOCK,), p.ptr(err))
        p = Params().ptr(cdf.address).ptr(last.address).ptr(u.addr).i64(rows).i64(cats).i64(num_samples)
        launch("multinomial", "multinomial_sample", grid1(rows * num_samples), (BLOCK,), p.ptr(addr(out)))
        return
    keys = scratch(rows * cats * 8)
    with checked(_multinomial_error) as err:
        p = Params().ptr(w.addr).i64(s0).i64(s1).ptr(u.addr).i64(rows).i64(cats).ptr(keys.address).ptr(err)
        block = (pow2_at_least(cats, 32, BLOCK),)
        launch("multinomial", f"multinomial_keys_{suf}", (min(rows, MAX_GRID),), block, p)
    sort_raw(Operand(keys.address, (rows, cats), (cats, 1), 4), 1, True, num_samples, out)


# ---- SVD ----------------------------------------------------------------------------------------------------

# svd.cu keeps one matrix per block in shared memory, within the 48 KiB a kernel gets without opting in
SVD_SMEM_BYTES = 48 * 1024
SVD_MAX_WARPS = 16
SVD_MAX_SWEEPS = 60  # PLAST_SVD_MAX_SWEEPS in svd.cuh


def svd_shared_bytes(m, n, itemsize):
    """Shared memory svd.cu needs for an m x n matrix: W (max x min), V (min x min), sigma, a reduction's
    scratch, ranks."""
    big, k = max(m, n), min(m, n)
    return (big * k + k * k + k + 32) * itemsize + 4 * k


def svd_fits(m, n, itemsize):
    return svd_shared_bytes(m, n, itemsize) <= SVD_SMEM_BYTES


def svd_max_square(itemsize):
    """The largest n for which an n x n matrix fits (54 for float64, 77 for float32)."""
    n = 1
    while svd_fits(n + 1, n + 1, itemsize):
        n += 1
    return n


def svd_plan(m, n, sm, sn):
    """How svd.cu sees an m x n matrix with element strides (sm, sn): the working matrix's strides (sr, sc), its
    size (rows, cols) with rows >= cols, and where its columns go, as ("u" or "vh", element stride, rank stride,
    batch stride) into the contiguous outputs U (m, k) and Vh (k, n), first for W's columns then for V's. W is
    the matrix itself when it is tall (W's columns are U's), its transpose when it is wide (they are Vh's rows)."""
    k = min(m, n)
    u_cols = ("u", k, 1, m * k)
    vh_rows = ("vh", 1, n, k * n)
    if m >= n:
        return (sm, sn), (m, n), u_cols, vh_rows
    return (sn, sm), (n, m), vh_rows, u_cols


def svd(node, inputs, outputs):
    """reduce_svd: U (..., m, k), S (..., k), Vh (..., k, n), k = min(m, n), singular values descending; a block
    per matrix (svd.cu). Matrices whose working set does not fit in 48 KiB of shared memory are refused; a
    matrix holding inf or NaN gets NaN factors (as numpy gives the CPU backend)."""
    u, s, vh = outputs
    if any(o.numel() == 0 for o in outputs):
        return
    code = _float_dtype(u, "SVD")
    x = as_code(operand(inputs[0]), code)
    *batch, m, n = x.shape
    item = ITEMSIZE[code]
    if not svd_fits(m, n, item):
        side = svd_max_square(item)
        raise NotImplementedError(
            f"CUDA SVD handles small matrices only (one per block, in {SVD_SMEM_BYTES // 1024} KiB of shared "
            f"memory): {u.dtype.name} matrices up to {side} x {side}, or tall/wide ones with about "
            f"(max(m, n) + min(m, n)) * min(m, n) <= {2 * side * side} elements; got {m} x {n}. Run it on the "
            "CPU (`.cpu()`)"
        )
    (sr, sc), (rows, cols), wdst, vdst = svd_plan(m, n, x.strides[-2], x.strides[-1])
    nb = prod(batch)
    (lb,) = layouts(tuple(batch), [tuple(x.strides[:-2])])
    base = {"u": addr(u), "vh": addr(vh)}

    def not_converged(code_, value, bound, pos):
        if code_ != ERROR_CODES["value"]:
            return None
        return RuntimeError(
            f"svd of a {(m, n)} matrix did not converge (batch entry {pos}, {SVD_MAX_SWEEPS} Jacobi sweeps)"
        )

    with checked(not_converged) as err:
        p = Params().ptr(x.addr).raw(lb).i64(sr).i64(sc).i32(rows).i32(cols).i64(nb)
        for which, es, rs, bs in (wdst, vdst):
            p.ptr(base[which]).i64(es).i64(rs).i64(bs)
        p.ptr(addr(s)).ptr(err)
        warps = min(SVD_MAX_WARPS, max(1, (cols + 1) // 2))
        grid = (min(nb, MAX_GRID),)
        launch("svd", f"svd_jacobi_{SUF[code]}", grid, (32 * warps,), p, shared=svd_shared_bytes(m, n, item))


EXTRA = {
    "scatter_reduce": scatter_reduce,
    "reduce_prod_excl": prod_excl,
    "multinomial": multinomial,
    "reduce_svd": svd,
}
