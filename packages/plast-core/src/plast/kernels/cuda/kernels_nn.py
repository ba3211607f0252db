"""CUDA launchers for matmul/addmm (and the fused addmm+activation), the softmax family, losses, embedding,
layer_norm, conv2d, pooling, flash attention, the fused optimizer updates and the Philox fills.

Same contract as kernels.py. Formulas and error messages follow the CPU kernels (kernels/cpu/kernels_nn.py,
kernels_optim.py), so the two backends agree and fail alike.
"""

import math

import numpy as np

from ..._core.codes import (
    ACT_CODES,
    CONV_MODES,
    ERROR_CODES,
    LOSS_BWD_MODES,
    LOSS_KIND_CODES,
    REDUCTION_CODES,
)
from ..._core.cuda_driver import matmul as flags
from ...memory import cuda as memory
from ..cpu import kernels_optim as _kopt
from . import abi, graphs
from .abi import Params
from .kernels import (
    BLOCK,
    F32,
    F64,
    I32,
    I64,
    ITEMSIZE,
    MAX_GRID,
    SUF,
    Operand,
    _bstrides,
    addr,
    as_code,
    bcast_strides,
    cdiv,
    checked,
    collapse,
    contiguous,
    contiguous_strides,
    fill_zero,
    grid1,
    launch,
    layouts,
    not_implemented,
    operand,
    pow2_at_least,
    prod,
    scratch,
)

# ---- matmul -------------------------------------------------------------------------------------------------


def _float_code(code, what):
    if code not in (F32, F64):
        raise NotImplementedError(f"CUDA {what} runs on float32/float64 tensors, got dtype code {code}")
    return code


def gemm(a, b, out, *, bias=None, alpha=1.0, beta=1.0, act=0):
    """out = act(alpha * a @ b + beta * bias) with numpy's matmul shape rules (1-d operands, batch broadcasting).
    a, b, bias: operands already in out's dtype; out: a contiguous tensor."""
    code = _float_code(out.dtype.code, "matmul")
    a_shape, a_st = (a.shape, a.strides) if len(a.shape) >= 2 else ((1,) + a.shape, (0,) + a.strides)
    b_shape, b_st = (b.shape, b.strides) if len(b.shape) >= 2 else (b.shape + (1,), b.strides + (0,))
    M, K = a_shape[-2], a_shape[-1]
    N = b_shape[-1]
    if b_shape[-2] != K:
        raise ValueError(f"matmul: inner dims differ: {a.shape} @ {b.shape}")
    batch_shape = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    if out.numel() == 0:
        return
    ba = Operand(0, a_shape[:-2], a_st[:-2], code)
    bb = Operand(0, b_shape[:-2], b_st[:-2], code)
    lists = [_bs(ba, batch_shape), _bs(bb, batch_shape)]
    if bias is not None:
        # bias broadcasts to batch + (M, N); its batch dims and its (m, n) strides are separate
        full = batch_shape + (M, N)
        bst = _bs(bias, full) if len(bias.shape) else (0,) * len(full)
        lists.append(bst[: len(batch_shape)])
        sbias_m, sbias_n = bst[-2], bst[-1]
    else:
        lists.append((0,) * len(batch_shape))
        sbias_m = sbias_n = 0
    la, lb, lbias = layouts(batch_shape, lists)
    batch = prod(batch_shape)
    sam, sak = a_st[-2], a_st[-1]
    sbk, sbn = b_st[-2], b_st[-1]
    a_kfast = 1 if abs(sak) <= abs(sam) else 0
    b_nfast = 1 if abs(sbn) <= abs(sbk) else 0
    tf32 = code == F32 and flags.allow_tf32
    args = abi.gemm_args(
        M,
        N,
        K,
        batch,
        sam,
        sak,
        sbk,
        sbn,
        sbias_m,
        sbias_n,
        la,
        lb,
        lbias,
        a_kfast,
        b_nfast,
        act,
        1 if bias is not None and beta != 0 else 0,
        alpha,
        beta,
    )
    p = Params().ptr(a.addr).ptr(b.addr).ptr(bias.addr if bias is not None else 0).ptr(addr(out)).raw(args)
    if tf32:
        launch("matmul", "gemm_tf32", (cdiv(N, 64), cdiv(M, 64), min(batch, 65535)), (128,), p)
    else:
        launch("matmul", f"gemm_{SUF[code]}", (cdiv(N, 128), cdiv(M, 128), min(batch, 65535)), (256,), p)


def _bs(op_, shape):
    nd, pad = len(shape), len(shape) - len(op_.shape)
    out = [0] * nd
    for i, s in enumerate(op_.shape):
        if pad + i >= 0 and (s != 1 or shape[pad + i] == 1):
            out[pad + i] = op_.strides[i]
    return tuple(out)


def matmul(node, inputs, outputs):
    out = outputs[0]
    code = out.dtype.code
    a, b = (as_code(operand(t), code) for t in inputs)
    gemm(a, b, out)


def addmm(node, inputs, outputs):
    beta, alpha = node.args
    out = outputs[0]
    code = out.dtype.code
    bias, a, b = (as_code(operand(t), code) for t in inputs)
    gemm(a, b, out, bias=bias, alpha=alpha, beta=beta)


def addmm_act(node, inputs, outputs, args):
    """Fused group kernel (graph/fusion.py signature): out = act(a @ b + bias) in one pass."""
    out = outputs[0]
    code = out.dtype.code
    bias, a, b = (as_code(operand(t), code) for t in inputs)
    gemm(a, b, out, bias=bias, act=ACT_CODES[args[0] or "none"])


# ---- softmax family -----------------------------------------------------------------------------------------


def _rows_along(shape, strides, dim):
    """(row layout over the other dims, stride along dim, K, rows) of a view normalized along `dim`."""
    if not shape:
        shape, strides, dim = (1,), (1,), 0
    d = dim % len(shape)
    other = [i for i in range(len(shape)) if i != d]
    return tuple(shape[i] for i in other), tuple(strides[i] for i in other), strides[d], shape[d]


def softmax(node, inputs, outputs):
    """softmax (args: dim, safe) and log_softmax (args: dim)."""
    dim = node.args[0]
    safe = node.args[1] if node.op.name == "softmax" else False
    out = outputs[0]
    if out.numel() == 0:
        return
    code = _float_code(out.dtype.code, node.op.name)
    x = as_code(operand(inputs[0]), code)
    rs, xst, sx, K = _rows_along(x.shape, x.strides, dim)
    _, ost, sy, _ = _rows_along(out._shape, out._strides, dim)
    lx, ly = layouts(rs, [xst, ost])
    rows = prod(rs)
    p = Params().ptr(x.addr).raw(lx).i64(sx).ptr(addr(out)).raw(ly).i64(sy).i64(K).i64(rows)
    p.i32(1 if node.op.name == "log_softmax" else 0).i32(1 if safe else 0)
    launch("softmax", f"softmax_fwd_{SUF[code]}", (min(rows, MAX_GRID),), (pow2_at_least(K),), p)


def softmax_backward(node, inputs, outputs):
    """softmax_backward / log_softmax_backward (args: dim); inputs g, y."""
    (dim,) = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    code = _float_code(out.dtype.code, node.op.name)
    g, y = (as_code(operand(t), code) for t in inputs)
    rs, gst, sg, K = _rows_along(g.shape, g.strides, dim)
    _, yst, sy, _ = _rows_along(y.shape, y.strides, dim)
    _, ost, so, _ = _rows_along(out._shape, out._strides, dim)
    lg, ly, lo = layouts(rs, [gst, yst, ost])
    rows = prod(rs)
    p = Params().ptr(g.addr).raw(lg).i64(sg).ptr(y.addr).raw(ly).i64(sy).ptr(addr(out)).raw(lo).i64(so)
    p.i64(K).i64(rows).i32(1 if node.op.name == "log_softmax_backward" else 0)
    launch("softmax", f"softmax_bwd_{SUF[code]}", (min(rows, MAX_GRID),), (pow2_at_least(K),), p)


# ---- losses -------------------------------------------------------------------------------------------------

K_INDEX, K_PROB, K_NLL = LOSS_KIND_CODES["index"], LOSS_KIND_CODES["prob"], LOSS_KIND_CODES["nll"]
NO_IGNORE = -(1 << 62)


def _class_rows(shape, strides):
    """Rows over (N, d1, ...) and the class stride of an (N, K, d1, ...) view."""
    return (shape[0],) + tuple(shape[2:]), (strides[0],) + tuple(strides[2:]), strides[1]


def _loss_setup(x, target, w, kind, code):
    """Packed row layouts of x and target, class stride, K, M, the target operand and contiguous weights."""
    K = x.shape[1]
    M = prod(x.shape) // K if K else 0
    rshape, xst, sk = _class_rows(x.shape, x.strides)
    if kind == K_PROB:
        target = as_code(target, code)
        _, tst, st = _class_rows(target.shape, target.strides)
        t64 = 0
    else:
        if target.code not in (I32, I64):
            target = as_code(target, I64)
        tst = _bs(target, rshape) if target.shape else (0,) * len(rshape)
        st, t64 = 0, 1 if target.code == I64 else 0
    lx, lt = layouts(rshape, [xst, tst])
    wop = contiguous(w, code) if w is not None else None
    return lx, lt, sk, st, t64, K, M, rshape, target, wop


def _target_error(op, k, ignore_index):
    def fmt(code, value, bound, pos):
        if code == ERROR_CODES["index"]:
            return IndexError(
                f"{op}: target {value} is out of bounds for {k} classes (expected 0 <= target < {k}, "
                f"or ignore_index={ignore_index})"
            )
        return None

    return fmt


def _kind_code(kind):
    return K_INDEX if kind == "index" else K_PROB


def _loss_forward(op, kind_code, x, target, w, ignore_index, reduction, eps, out):
    code = _float_code(out.dtype.code, op)
    x = as_code(x, code)
    lx, lt, sk, st, t64, K, M, _, target, wop = _loss_setup(x, target, w, kind_code, code)
    nll, smooth, wt = (scratch(max(M, 1) * ITEMSIZE[code]) for _ in range(3))
    ign = NO_IGNORE if ignore_index is None else int(ignore_index)
    with checked(_target_error(op, K, ignore_index)) as err:
        if M:
            p = (
                Params()
                .i32(kind_code)
                .ptr(x.addr)
                .raw(lx)
                .i64(sk)
                .i64(K)
                .i64(M)
                .ptr(target.addr)
                .i32(t64)
                .raw(lt)
            )
            p.i64(st).ptr(wop.addr if wop else 0).i64(ign).scalar(code, eps).ptr(nll.address).ptr(
                smooth.address
            )
            p.ptr(wt.address).ptr(err)
            launch("loss", f"loss_rows_{SUF[code]}", (min(M, MAX_GRID),), (pow2_at_least(K, hi=256),), p)
    red = REDUCTION_CODES[reduction]
    p = Params().i32(kind_code).i32(red).ptr(nll.address).ptr(smooth.address).ptr(wt.address).i64(M).i64(K)
    p.scalar(code, eps).ptr(addr(out))
    if red == REDUCTION_CODES["none"]:
        if M:
            launch("loss", f"loss_finish_{SUF[code]}", grid1(M), (BLOCK,), p)
    else:
        launch("loss", f"loss_finish_{SUF[code]}", (1,), (1024,), p)


def cross_entropy(node, inputs, outputs):
    kind, ignore_index, reduction, eps = node.args[:4]
    w = operand(inputs[2]) if len(inputs) > 2 else None
    _loss_forward(
        "cross_entropy",
        _kind_code(kind),
        operand(inputs[0]),
        operand(inputs[1]),
        w,
        ignore_index,
        reduction,
        eps,
        outputs[0],
    )


def nll_loss(node, inputs, outputs):
    ignore_index, reduction = node.args
    w = operand(inputs[2]) if len(inputs) > 2 else None
    _loss_forward(
        "nll_loss", K_NLL, operand(inputs[0]), operand(inputs[1]), w, ignore_index, reduction, 0.0, outputs[0]
    )


def _mean_divisor(op, x, target, w, ignore_index, code):
    """Device scalar: the sum of target weights over non-ignored rows (the 'mean' divisor)."""
    lx, lt, sk, st, t64, K, M, _, target, wop = _loss_setup(x, target, w, K_NLL, code)
    wt = scratch(max(M, 1) * ITEMSIZE[code])
    dn = scratch(ITEMSIZE[code])
    ign = NO_IGNORE if ignore_index is None else int(ignore_index)
    with checked(_target_error(op, K, ignore_index)) as err:
        if M:
            p = (
                Params()
                .i32(K_NLL)
                .ptr(x.addr)
                .raw(lx)
                .i64(sk)
                .i64(K)
                .i64(M)
                .ptr(target.addr)
                .i32(t64)
                .raw(lt)
            )
            p.i64(st).ptr(wop.addr if wop else 0).i64(ign).scalar(code, 0.0).ptr(wt.address).ptr(wt.address)
            p.ptr(wt.address).ptr(err)
            launch("loss", f"loss_rows_{SUF[code]}", (min(M, MAX_GRID),), (32,), p)
    red = REDUCTION_CODES["sum"]  # the divisor is the sum of the weights: loss_finish sums wt as the "loss"
    p = Params().i32(K_NLL).i32(red).ptr(wt.address).ptr(wt.address).ptr(wt.address).i64(M).i64(K)
    p.scalar(code, 0.0).ptr(dn.address)
    launch("loss", f"loss_finish_{SUF[code]}", (1,), (1024,), p)
    return dn


def _loss_backward(op, mode, kind_code, g, x, target, w, ignore_index, reduction, eps, out):
    code = _float_code(out.dtype.code, op)
    x = as_code(x, code)
    lx, lt, sk, st, t64, K, M, rshape, target_c, wop = _loss_setup(x, target, w, kind_code, code)
    red = REDUCTION_CODES[reduction]
    dn = None
    if red == REDUCTION_CODES["mean"] and kind_code != K_PROB:
        dn = _mean_divisor(op, x, target, w, ignore_index, code)
    if g is not None:
        g = as_code(g, code)
        gst = _bs(g, rshape) if (red == REDUCTION_CODES["none"] and g.shape) else (0,) * len(rshape)
        g_addr = g.addr
    else:
        gst, g_addr = (0,) * len(rshape), 0
    _, ost, so = _class_rows(out._shape, out._strides)
    lg, lo = layouts(rshape, [gst, ost])
    ign = NO_IGNORE if ignore_index is None else int(ignore_index)
    with checked(_target_error(op, K, ignore_index)) as err:
        if M:
            p = (
                Params()
                .i32(mode)
                .i32(kind_code)
                .i32(red)
                .ptr(g_addr)
                .raw(lg)
                .ptr(x.addr)
                .raw(lx)
                .i64(sk)
                .i64(K)
            )
            p.i64(M).ptr(target_c.addr).i32(t64).raw(lt).i64(st).ptr(wop.addr if wop else 0).i64(ign)
            p.scalar(code, eps).ptr(dn.address if dn is not None else 0).ptr(addr(out)).raw(lo).i64(so).ptr(
                err
            )
            launch("loss", f"loss_bwd_{SUF[code]}", (min(M, MAX_GRID),), (pow2_at_least(K, hi=256),), p)


def cross_entropy_backward(node, inputs, outputs):
    """d loss / d input = g * (softmax(x) * sum_c(C) - C), inputs g, x, target[, weight]."""
    kind, ignore_index, reduction, eps = node.args[:4]
    if outputs[0].numel() == 0:
        return
    w = operand(inputs[3]) if len(inputs) > 3 else None
    _loss_backward(
        "cross_entropy",
        LOSS_BWD_MODES["grad"],
        _kind_code(kind),
        operand(inputs[0]),
        operand(inputs[1]),
        operand(inputs[2]),
        w,
        ignore_index,
        reduction,
        eps,
        outputs[0],
    )


def loss_coeffs(node, inputs, outputs):
    """The dense coefficients C (shaped like the input), inputs target[, weight]."""
    kind, ignore_index, reduction, eps, xshape = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    # x is never read in coefficient mode; the output stands in for it (same shape, valid memory)
    x = Operand(addr(out), tuple(xshape), out._strides, out.dtype.code)
    w = operand(inputs[1]) if len(inputs) > 1 else None
    mode = LOSS_BWD_MODES["coeffs"]
    _loss_backward(
        "loss", mode, _kind_code(kind), None, x, operand(inputs[0]), w, ignore_index, reduction, eps, out
    )


# ---- binary cross-entropy -----------------------------------------------------------------------------------

_NO_LAYOUT = abi.layout((1,), (0,))  # the layout packed for an absent operand (the kernel never reads it)


def _bce_operands(inputs, code):
    """Operands in dtype `code` and their layouts over the input's shape (weights broadcast to it)."""
    shape = tuple(inputs[0]._shape)
    ops = [as_code(operand(t), code) for t in inputs]
    return shape, ops, layouts(shape, [_bstrides(o, shape) for o in ops])


def _bce_reduce(outputs, reduction, n, code, write):
    """write(address) puts the n loss terms there: the output itself ('none'), else scratch summed into it."""
    out = outputs[0]
    if reduction == "none":
        if n:
            write(addr(out))
        return
    terms = scratch(n * ITEMSIZE[code])
    if n:
        write(terms.address)
    p = Params().ptr(terms.address).i64(n).i32(1 if reduction == "mean" else 0).ptr(addr(out))
    launch("loss", f"bce_finish_{SUF[code]}", (1,), (1024,), p)


def _bce_range_error(code, value, bound, pos):
    if code == ERROR_CODES["value"]:
        v = float(np.array([value], dtype=np.int64).view(np.float64)[0])
        return ValueError(
            f"binary_cross_entropy: all elements of input should be between 0 and 1, got {v!r} (element {pos}); "
            "pass probabilities (e.g. sigmoid(logits)) or use binary_cross_entropy_with_logits"
        )
    return None


def binary_cross_entropy(node, inputs, outputs):
    """inputs (x, t[, w]); args (reduction,)."""
    (reduction,) = node.args
    code = _float_code(outputs[0].dtype.code, "binary_cross_entropy")
    shape, ops, lays = _bce_operands(inputs, code)
    x, t = ops[:2]
    w, lw = (ops[2], lays[2]) if len(ops) > 2 else (None, _NO_LAYOUT)
    n = prod(shape)

    def write(dst):
        with checked(_bce_range_error) as err:
            p = Params().ptr(x.addr).raw(lays[0]).ptr(t.addr).raw(lays[1]).ptr(w.addr if w else 0).raw(lw)
            p.ptr(dst).i64(n).ptr(err)
            launch("loss", f"bce_{SUF[code]}", grid1(n), (BLOCK,), p)

    _bce_reduce(outputs, reduction, n, code, write)


def binary_cross_entropy_with_logits(node, inputs, outputs):
    """inputs (x, t[, w][, pos_weight]); args (reduction, has_w, has_pw)."""
    reduction, has_w, has_pw = node.args
    code = _float_code(outputs[0].dtype.code, "binary_cross_entropy_with_logits")
    shape, ops, lays = _bce_operands(inputs, code)
    x, t = ops[:2]
    w, lw = (ops[2], lays[2]) if has_w else (None, _NO_LAYOUT)
    pw, lpw = (ops[2 + has_w], lays[2 + has_w]) if has_pw else (None, _NO_LAYOUT)
    n = prod(shape)

    def write(dst):
        p = Params().ptr(x.addr).raw(lays[0]).ptr(t.addr).raw(lays[1]).ptr(w.addr if w else 0).raw(lw)
        p.ptr(pw.addr if pw else 0).raw(lpw).ptr(dst).i64(n)
        launch("loss", f"bce_logits_{SUF[code]}", grid1(n), (BLOCK,), p)

    _bce_reduce(outputs, reduction, n, code, write)


def binary_cross_entropy_backward(node, inputs, outputs):
    """inputs (g, x, t[, w]) with g broadcast to x's shape; output x's shape."""
    out = outputs[0]
    code = _float_code(out.dtype.code, "binary_cross_entropy backward")
    n = out.numel()
    if n == 0:
        return
    shape = tuple(out._shape)
    ops = [as_code(operand(t), code) for t in inputs]
    lays = layouts(shape, [_bstrides(o, shape) for o in ops])
    g, x, t = ops[:3]
    w, lw = (ops[3], lays[3]) if len(ops) > 3 else (None, _NO_LAYOUT)
    p = Params().ptr(g.addr).raw(lays[0]).ptr(x.addr).raw(lays[1]).ptr(t.addr).raw(lays[2])
    p.ptr(w.addr if w else 0).raw(lw).ptr(addr(out)).i64(n)
    launch("loss", f"bce_bwd_{SUF[code]}", grid1(n), (BLOCK,), p)


# ---- embedding, one_hot -------------------------------------------------------------------------------------


def _id_error(op, n, what="id"):
    def fmt(code, value, bound, pos):
        if code == ERROR_CODES["index"]:
            return IndexError(
                f"{op}: {what} {value} is out of range for {n} rows (expected 0 <= {what} < {n})"
            )
        return None

    return fmt


def _ids(t):
    ids = operand(t)
    if ids.code not in (I32, I64):
        ids = as_code(ids, I64)
    (lid,) = layouts(ids.shape, [ids.strides])
    return ids, lid


def embedding(node, inputs, outputs):
    padding_idx, zero_padding = node.args
    out = outputs[0]
    w = inputs[1]
    code = _float_code(w.dtype.code, "embedding")
    ids, lid = _ids(inputs[0])
    V, D = w._shape
    n_ids = prod(ids.shape)
    with checked(_id_error("embedding", V)) as err:
        if n_ids:
            p = Params().ptr(ids.addr).i32(ids.code == I64).raw(lid).i64(n_ids).ptr(addr(w)).i64(V).i64(D)
            p.i64(w._strides[0]).i64(w._strides[1]).ptr(addr(out))
            p.i64(NO_IGNORE if padding_idx is None else padding_idx).i32(1 if zero_padding else 0).ptr(err)
            launch(
                "index", f"embedding_fwd_{SUF[code]}", (min(n_ids, MAX_GRID),), (pow2_at_least(D, hi=256),), p
            )


def embedding_backward(node, inputs, outputs):
    num, padding_idx = node.args
    out = outputs[0]
    code = _float_code(out.dtype.code, "embedding backward")
    fill_zero(out)
    g = as_code(operand(inputs[0]), code)
    ids, lid = _ids(inputs[1])
    D = out._shape[1]
    n_ids = prod(ids.shape)
    if n_ids == 0 or D == 0:
        return
    (lg,) = layouts(g.shape, [g.strides])
    with checked(_id_error("embedding", num)) as err:
        p = Params().ptr(g.addr).raw(lg).ptr(ids.addr).i32(ids.code == I64).raw(lid).i64(n_ids).ptr(addr(out))
        p.i64(num).i64(D).i64(NO_IGNORE if padding_idx is None else padding_idx).ptr(err)
        launch("index", f"embedding_bwd_{SUF[code]}", (min(n_ids, MAX_GRID),), (pow2_at_least(D, hi=256),), p)


def one_hot(node, inputs, outputs):
    (k,) = node.args
    out = outputs[0]
    fill_zero(out)
    ids, lid = _ids(inputs[0])
    n = prod(ids.shape)
    with checked(_id_error("one_hot", k, "class index")) as err:
        if n and k:
            p = Params().ptr(ids.addr).i32(ids.code == I64).raw(lid).i64(n).i64(k).ptr(addr(out)).ptr(err)
            launch("index", "one_hot", grid1(n), (BLOCK,), p)


# ---- layer_norm ---------------------------------------------------------------------------------------------


def layer_norm(node, inputs, outputs):
    k, eps, has_w, has_b = node.args
    y, mean, rstd = outputs
    code = _float_code(y.dtype.code, "layer_norm")
    x = contiguous(operand(inputs[0]), code)
    i = 1
    w = b = None
    if has_w:
        w = contiguous(operand(inputs[i]), code)
        i += 1
    if has_b:
        b = contiguous(operand(inputs[i]), code)
    N = prod(x.shape[len(x.shape) - k :])
    rows = prod(x.shape[: len(x.shape) - k])
    if rows == 0:
        return
    p = Params().ptr(x.addr).ptr(w.addr if w else 0).ptr(b.addr if b else 0).ptr(addr(y)).ptr(addr(mean))
    p.ptr(addr(rstd)).i64(rows).i64(N).scalar(code, eps)
    launch("layernorm", f"layer_norm_fwd_{SUF[code]}", (min(rows, MAX_GRID),), (pow2_at_least(N, hi=256),), p)


def layer_norm_backward(node, inputs, outputs):
    (k,) = node.args
    gx, gw, gb = outputs
    code = _float_code(gx.dtype.code, "layer_norm backward")
    gy, x, mean, rstd = (contiguous(operand(t), code) for t in inputs[:4])
    w = contiguous(operand(inputs[4]), code) if len(inputs) > 4 else None
    N = prod(x.shape[len(x.shape) - k :])
    rows = prod(x.shape[: len(x.shape) - k])
    if N == 0:
        return
    if rows:
        p = (
            Params()
            .ptr(gy.addr)
            .ptr(x.addr)
            .ptr(mean.addr)
            .ptr(rstd.addr)
            .ptr(w.addr if w else 0)
            .ptr(addr(gx))
        )
        p.i64(rows).i64(N)
        launch(
            "layernorm",
            f"layer_norm_bwd_rows_{SUF[code]}",
            (min(rows, MAX_GRID),),
            (pow2_at_least(N, hi=256),),
            p,
        )
    p = (
        Params()
        .ptr(gy.addr)
        .ptr(x.addr)
        .ptr(mean.addr)
        .ptr(rstd.addr)
        .ptr(addr(gw))
        .ptr(addr(gb))
        .i64(rows)
        .i64(N)
    )
    launch("layernorm", f"layer_norm_bwd_cols_{SUF[code]}", (cdiv(N, 32),), (32, 8), p)


# ---- conv2d (implicit GEMM) ---------------------------------------------------------------------------------


def _conv(mode, x, w, g, bias, out, xshape, wshape, gshape, stride, pads, dil, groups):
    code = _float_code(out.dtype.code, "conv2d")
    n, c, h, wd = xshape
    o, cg, kh, kw = wshape
    ho, wo = gshape[2], gshape[3]
    pt, pl = pads[0], pads[2]
    og = o // groups
    if mode == CONV_MODES["forward"]:
        M, Ng = og, n * ho * wo
    elif mode == CONV_MODES["grad_input"]:
        M, Ng = cg, n * h * wd
    else:
        M, Ng = og, cg * kh * kw
    xs = x.strides if x is not None else (0,) * 4
    ws = w.strides if w is not None else (0,) * 4
    gs = g.strides if g is not None else (0,) * 4
    args = abi.conv_args(
        n,
        c,
        h,
        wd,
        o,
        ho,
        wo,
        kh,
        kw,
        stride[0],
        stride[1],
        pt,
        pl,
        dil[0],
        dil[1],
        groups,
        xs,
        ws,
        gs,
        mode,
        1 if bias is not None else 0,
    )
    any_ptr = addr(out)
    p = Params().ptr(x.addr if x is not None else any_ptr).ptr(w.addr if w is not None else any_ptr)
    p.ptr(g.addr if g is not None else any_ptr).ptr(bias.addr if bias is not None else 0).ptr(addr(out)).raw(
        args
    )
    launch("conv", f"conv2d_{SUF[code]}", (cdiv(Ng, 64), cdiv(M, 64), groups), (256,), p)


def conv2d(node, inputs, outputs):
    stride, pads, dil, groups = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    code = out.dtype.code
    x, w = (as_code(operand(t), code) for t in inputs[:2])
    bias = contiguous(operand(inputs[2]), code) if len(inputs) > 2 else None
    mode = CONV_MODES["forward"]
    _conv(mode, x, w, None, bias, out, x.shape, w.shape, out._shape, stride, pads, dil, groups)


def conv2d_backward_input(node, inputs, outputs):
    xshape, stride, pads, dil, groups = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    code = out.dtype.code
    g, w = (as_code(operand(t), code) for t in inputs)
    mode = CONV_MODES["grad_input"]
    _conv(mode, None, w, g, None, out, tuple(xshape), w.shape, g.shape, stride, pads, dil, groups)


def conv2d_backward_weight(node, inputs, outputs):
    wshape, stride, pads, dil, groups = node.args
    out = outputs[0]
    if out.numel() == 0:
        return
    code = out.dtype.code
    g, x = (as_code(operand(t), code) for t in inputs)
    mode = CONV_MODES["grad_weight"]
    _conv(mode, x, None, g, None, out, x.shape, tuple(wshape), g.shape, stride, pads, dil, groups)


# ---- pooling ------------------------------------------------------------------------------------------------


def _pool_args(xshape, xs, oshape, k, stride, pads, dil, cip=0, div=0):
    n, c, h, w = xshape
    return abi.pool_args(
        n,
        c,
        h,
        w,
        oshape[2],
        oshape[3],
        k[0],
        k[1],
        stride[0],
        stride[1],
        pads[0],
        pads[1],
        dil[0],
        dil[1],
        xs,
        cip,
        div,
    )


def max_pool2d(node, inputs, outputs):
    k, stride, pads, dil = node.args
    vals, idx = outputs
    n = vals.numel()
    if n == 0:
        return
    code = _float_code(vals.dtype.code, "max_pool2d")
    x = as_code(operand(inputs[0]), code)
    args = _pool_args(x.shape, x.strides, vals._shape, k, stride, pads, dil)
    launch(
        "pool",
        f"max_pool_fwd_{SUF[code]}",
        grid1(n),
        (BLOCK,),
        Params().ptr(x.addr).ptr(addr(vals)).ptr(addr(idx)).raw(args),
    )


def max_pool2d_backward(node, inputs, outputs):
    (xshape,) = node.args
    gx = outputs[0]
    fill_zero(gx)
    code = _float_code(gx.dtype.code, "max_pool2d backward")
    g = as_code(operand(inputs[0]), code)
    idx = contiguous(operand(inputs[1]), 2)
    total = prod(g.shape)
    if total == 0 or gx.numel() == 0:
        return
    n, c, h, w = xshape
    (lg,) = layouts(g.shape, [g.strides])
    p = Params().ptr(g.addr).raw(lg).ptr(idx.addr).ptr(addr(gx)).i64(n * c).i64(total // (n * c)).i64(h * w)
    launch("pool", f"max_pool_bwd_{SUF[code]}", grid1(total), (BLOCK,), p)


def pool_gather(node, inputs, outputs):
    out = outputs[0]
    total = out.numel()
    if total == 0:
        return
    code = _float_code(out.dtype.code, "max_pool2d")
    hx = as_code(operand(inputs[0]), code)
    idx = contiguous(operand(inputs[1]), 2)
    n, c, h, w = hx.shape
    (lhp,) = layouts((n, c), [hx.strides[:2]])
    p = (
        Params()
        .ptr(hx.addr)
        .raw(lhp)
        .i64(hx.strides[2])
        .i64(hx.strides[3])
        .i64(w)
        .ptr(idx.addr)
        .ptr(addr(out))
    )
    p.i64(n * c).i64(total // (n * c))
    launch("pool", f"pool_gather_{SUF[code]}", grid1(total), (BLOCK,), p)


def avg_pool2d(node, inputs, outputs):
    k, stride, pads, count_include_pad, divisor_override = node.args
    out = outputs[0]
    n = out.numel()
    if n == 0:
        return
    code = _float_code(out.dtype.code, "avg_pool2d")
    x = as_code(operand(inputs[0]), code)
    args = _pool_args(
        x.shape,
        x.strides,
        out._shape,
        k,
        stride,
        pads,
        (1, 1),
        1 if count_include_pad else 0,
        int(divisor_override or 0),
    )
    launch(
        "pool", f"avg_pool_fwd_{SUF[code]}", grid1(n), (BLOCK,), Params().ptr(x.addr).ptr(addr(out)).raw(args)
    )


def avg_pool2d_backward(node, inputs, outputs):
    xshape, k, stride, pads, count_include_pad, divisor_override = node.args
    gx = outputs[0]
    n = gx.numel()
    if n == 0:
        return
    code = _float_code(gx.dtype.code, "avg_pool2d backward")
    g = as_code(operand(inputs[0]), code)
    args = _pool_args(
        tuple(xshape),
        (0, 0, 0, 0),
        g.shape,
        k,
        stride,
        pads,
        (1, 1),
        1 if count_include_pad else 0,
        int(divisor_override or 0),
    )
    (lg,) = layouts(g.shape, [g.strides])
    launch(
        "pool",
        f"avg_pool_bwd_{SUF[code]}",
        grid1(n),
        (BLOCK,),
        Params().ptr(g.addr).raw(lg).ptr(addr(gx)).raw(args),
    )


# ---- flash attention ----------------------------------------------------------------------------------------

ATT_ROWS = 8


def _dch(d):
    for c in (1, 2, 4):
        if d <= 32 * c:
            return c
    raise NotImplementedError(f"the CUDA attention kernel takes head dims up to 128, got {d}")


def _bhl(op_):
    """(batch, head, row) strides of a (B, H, L, D) operand whose last dim is contiguous."""
    if op_.strides[-1] != 1:
        op_ = contiguous(op_)
    return op_, tuple(op_.strides[:3])


def flash_attention_forward(q, k, v, out, lse, *, causal=False, scale=None):
    """out = softmax(q @ k^T * scale (+ causal mask)) @ v without the score matrix, and lse per row.

    q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv): float32 operands (kernels.operand of a tensor); out
    (B, H, L, Dv) and lse (B, H, L) float32 contiguous device addresses. Rows that see nothing give zeros.
    """
    B, H, L, D = q.shape
    S, Dv = k.shape[2], v.shape[3]
    (q, qs), (k, ks), (v, vs) = _bhl(as_code(q, F32)), _bhl(as_code(k, F32)), _bhl(as_code(v, F32))
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    args = abi.attn_args(B, H, L, S, D, Dv, qs, ks, vs, (0, 0, 0), sc, causal)
    if B * H * L == 0:
        return
    p = Params().ptr(q.addr).ptr(k.addr).ptr(v.addr).ptr(out).ptr(lse).raw(args)
    launch("attention", f"attn_fwd_d{_dch(max(D, Dv))}", (cdiv(L, ATT_ROWS), B * H), (ATT_ROWS * 32,), p)


def flash_attention_backward(q, k, v, o, lse, g, dq, dk, dv, *, causal=False, scale=None):
    """dq, dk, dv (contiguous float32 device addresses) of flash_attention_forward, given its output o (address,
    contiguous), lse (address) and the output gradient g (operand)."""
    B, H, L, D = q.shape
    S, Dv = k.shape[2], v.shape[3]
    (q, qs), (k, ks), (v, vs), (g, gs) = (_bhl(as_code(t, F32)) for t in (q, k, v, g))
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    args = abi.attn_args(B, H, L, S, D, Dv, qs, ks, vs, gs, sc, causal)
    rows = B * H * L
    dlt = scratch(max(rows, 1) * 4)
    if rows:
        launch(
            "attention",
            "attn_bwd_pre",
            grid1(rows * 32),
            (BLOCK,),
            Params().ptr(o).ptr(g.addr).ptr(dlt.address).raw(args),
        )
    c = _dch(max(D, Dv))
    if B * H * S:
        p = Params().ptr(q.addr).ptr(k.addr).ptr(v.addr).ptr(g.addr).ptr(lse).ptr(dlt.address).ptr(dk).ptr(dv)
        launch("attention", f"attn_bwd_kv_d{c}", (cdiv(S, ATT_ROWS), B * H), (ATT_ROWS * 32,), p.raw(args))
    if rows:
        p = Params().ptr(q.addr).ptr(k.addr).ptr(v.addr).ptr(g.addr).ptr(lse).ptr(dlt.address).ptr(dq)
        launch("attention", f"attn_bwd_q_d{c}", (cdiv(L, ATT_ROWS), B * H), (ATT_ROWS * 32,), p.raw(args))


def _bhld(t):
    """A (..., L, D) tensor as a (1, H, L, D) float32 operand, its batch dims merged into H (copied when they
    do not merge)."""
    op_ = as_code(operand(t), F32)
    batch, st = op_.shape[:-2], op_.strides[:-2]
    shp, (bst,) = collapse(batch, [st]) if batch else ((1,), [(0,)])
    if len(shp) != 1:
        op_ = contiguous(op_)
        bst = (op_.shape[-2] * op_.shape[-1],)
    n = prod(batch)
    return Operand(
        op_.addr, (1, n, op_.shape[-2], op_.shape[-1]), (0, bst[0], op_.strides[-2], op_.strides[-1]), 3, op_
    )


def _attention_dtype(t):
    if t.dtype.code != F32:
        raise NotImplementedError(
            f"the CUDA flash attention kernels run on float32, got {t.dtype}; use float32 or run it on the CPU"
        )


def flash_attention(node, inputs, outputs):
    """The flash_attention op (ops/attention.py): outputs (out, lse), q/k/v of shape (..., L|S, D)."""
    scale, causal = node.args
    out, lse = outputs
    _attention_dtype(out)
    q, k, v = (_bhld(t) for t in inputs)
    flash_attention_forward(q, k, v, addr(out), addr(lse), causal=causal, scale=scale)


def flash_attention_backward_op(node, inputs, outputs):
    """The flash_attention_backward op: inputs (q, k, v, out, lse, g), outputs (dq, dk, dv)."""
    scale, causal = node.args
    q, k, v, o, lse, g = inputs
    _attention_dtype(q)
    dq, dk, dv = outputs
    o_c, lse_c = contiguous(as_code(operand(o), F32)), contiguous(as_code(operand(lse), F32))
    flash_attention_backward(
        *(_bhld(t) for t in (q, k, v)),
        o_c.addr,
        lse_c.addr,
        _bhld(g),
        addr(dq),
        addr(dk),
        addr(dv),
        causal=causal,
        scale=scale,
    )


# ---- fused optimizer updates (multi-tensor apply) -----------------------------------------------------------

OPT_CHUNK = 16384
_tables = {}  # packed table bytes -> device storage (persistent arena); tensors are persistent, so it hits


def _device_bytes(data):
    st = _tables.get(data)
    if st is None:
        if len(_tables) >= 256:
            _tables.clear()
        st = memory.persistent_arena().new(len(data))
        memory.from_host(st, np.frombuffer(data, dtype=np.uint8))
        _tables[data] = st
    cap = graphs.active()
    if cap is not None:
        cap.hold(st)  # a CUDA graph reads this table on every replay, long after the cache may drop it
    return st


def _f64(t):
    if t.dtype.code not in (F32, F64):
        raise NotImplementedError(f"CUDA optimizer updates take float32/float64 tensors, got {t.dtype}")
    return 1 if t.dtype.code == F64 else 0


def _need_contiguous(ts, what):
    for t in ts:
        if not (tuple(t._strides) == contiguous_strides(t._shape) or t.numel() <= 1):
            raise NotImplementedError(f"CUDA optimizer updates need contiguous {what}")


def _multi_tensor(entries, params):
    """Per parameter dtype: (code, table storage, chunk storage, n_chunks, n_tensors)."""
    groups = {}
    for e, p in zip(entries, params):
        groups.setdefault(p.dtype.code, []).append(e)
    out = []
    for code, ents in groups.items():
        tab = b"".join(abi.OPT_ENTRY.pack(*e) for e in ents)
        chunks = []
        for i, e in enumerate(ents):
            n = e[7]
            chunks += [abi.OPT_CHUNK.pack(i, 0, s) for s in range(0, n, OPT_CHUNK)]
        if not chunks:
            continue
        out.append((code, _device_bytes(tab), _device_bytes(b"".join(chunks)), len(chunks), len(ents)))
    return out


def _found_inf(kind, node, inputs):
    """The device address of the update's found_inf input (GradScaler's, ops/optim.py), or 0 when it has none:
    every kernel of the update takes it last and does nothing while it is nonzero."""
    k = _kopt.fixed_inputs(kind, node.args)
    return addr(inputs[k]) if len(inputs) > k else 0


def sgd_update(node, inputs, outputs):
    n, n_hyper, hidx, has_bufs, nesterov, maximize = node.args
    fi = _found_inf(_kopt._optim.SGD, node, inputs)
    hyp = inputs[:n_hyper]
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    bufs = inputs[base + 2 * n : base + 3 * n] if has_bufs else [None] * n
    fresh = inputs[base + 3 * n : base + 4 * n] if has_bufs else [None] * n
    _need_contiguous(
        [*params, *grads, *(b for b in bufs if b is not None)], "parameters, gradients and buffers"
    )
    entries = []
    for i in range(n):
        h = hyp[hidx[i]]
        f = fresh[i]
        entries.append(
            (
                addr(params[i]),
                addr(grads[i]),
                addr(bufs[i]) if bufs[i] is not None else 0,
                0,
                addr(f) if f is not None else 0,
                0,
                addr(h),
                params[i].numel(),
                _f64(grads[i]),
                _f64(f) if f is not None else 0,
                _f64(h),
                0,
            )
        )
    for code, tab, chunks, n_chunks, n_t in _multi_tensor(entries, params):
        p = Params().ptr(tab.address).ptr(chunks.address).i32(1 if has_bufs else 0).i32(1 if nesterov else 0)
        p.i32(1 if maximize else 0).ptr(fi)
        launch("optim", f"sgd_{SUF[code]}", (n_chunks,), (BLOCK,), p)
        if has_bufs:
            launch(
                "optim", "opt_clear_flags", grid1(n_t), (BLOCK,), Params().ptr(tab.address).i32(n_t).ptr(fi)
            )


def adam_update(node, inputs, outputs):
    n, n_hyper, hidx, amsgrad, decoupled, maximize = node.args
    hyp = inputs[:n_hyper]
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    m = inputs[base + 2 * n : base + 3 * n]
    v = inputs[base + 3 * n : base + 4 * n]
    steps = inputs[base + 4 * n : base + 5 * n]
    vmax = inputs[base + 5 * n : base + 6 * n] if amsgrad else [None] * n
    _need_contiguous([*params, *grads, *m, *v, *(t for t in vmax if t is not None)], "parameters and state")
    _counted_update(
        "adam",
        params,
        grads,
        (m, v, vmax),
        steps,
        hyp,
        hidx,
        (amsgrad, decoupled, maximize),
        found_inf=_found_inf(_kopt._optim.ADAM, node, inputs),
    )


def rmsprop_update(node, inputs, outputs):
    """The rmsprop_update op (ops/optim_rmsprop.py): inputs hyper tensors, then params, grads, square_avgs, steps
    and, when present, momentum buffers and grad_avgs; every step counter goes up by one, as on the CPU."""
    n, n_hyper, hidx, has_mom, centered, maximize = node.args
    hyp = inputs[:n_hyper]
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    sqs = inputs[base + 2 * n : base + 3 * n]
    steps = inputs[base + 3 * n : base + 4 * n]
    k = base + 4 * n
    bufs = inputs[k : k + n] if has_mom else [None] * n
    k += n if has_mom else 0
    gavgs = inputs[k : k + n] if centered else [None] * n
    _need_contiguous(
        [*params, *grads, *sqs, *(t for t in (*bufs, *gavgs) if t is not None)], "parameters and state"
    )
    _counted_update(
        "rmsprop",
        params,
        grads,
        (sqs, bufs, gavgs),
        steps,
        hyp,
        hidx,
        (has_mom, centered, maximize),
        found_inf=_found_inf(_kopt._optim.RMSPROP, node, inputs),
    )


def adadelta_update(node, inputs, outputs):
    """The adadelta_update op (ops/optim_adadelta.py): inputs hyper tensors, then params, grads, square_avgs,
    acc_deltas and steps."""
    n, n_hyper, hidx, maximize = node.args
    params, grads, sqs, accs, steps = _slices(inputs, n_hyper, n, 5)
    _need_contiguous([*params, *grads, *sqs, *accs], "parameters and state")
    _counted_update(
        "adadelta",
        params,
        grads,
        (sqs, accs, [None] * n),
        steps,
        inputs[:n_hyper],
        hidx,
        (maximize,),
        found_inf=_found_inf(_kopt._optim.ADADELTA, node, inputs),
    )


def adagrad_update(node, inputs, outputs):
    """The adagrad_update op (ops/optim_adagrad.py): inputs hyper tensors, then params, grads, state sums and
    steps."""
    n, n_hyper, hidx, maximize = node.args
    params, grads, sums, steps = _slices(inputs, n_hyper, n, 4)
    _need_contiguous([*params, *grads, *sums], "parameters and state")
    none = [None] * n
    _counted_update(
        "adagrad",
        params,
        grads,
        (sums, none, none),
        steps,
        inputs[:n_hyper],
        hidx,
        (maximize,),
        found_inf=_found_inf(_kopt._optim.ADAGRAD, node, inputs),
    )


def adamax_update(node, inputs, outputs):
    """The adamax_update op (ops/optim_adamax.py): inputs hyper tensors, then params, grads, exp_avgs, exp_infs
    and steps."""
    n, n_hyper, hidx, maximize = node.args
    params, grads, ms, us, steps = _slices(inputs, n_hyper, n, 5)
    _need_contiguous([*params, *grads, *ms, *us], "parameters and state")
    _counted_update(
        "adamax",
        params,
        grads,
        (ms, us, [None] * n),
        steps,
        inputs[:n_hyper],
        hidx,
        (maximize,),
        found_inf=_found_inf(_kopt._optim.ADAMAX, node, inputs),
    )


def nadam_update(node, inputs, outputs):
    """The nadam_update op (ops/optim_nadam.py): inputs hyper tensors, then params, grads, exp_avgs, exp_avg_sqs,
    steps and mu_products (one-element tensors of their own dtype, in the third state slot; nadam_mu multiplies
    each by this step's momentum coefficient before the update reads it)."""
    n, n_hyper, hidx, decoupled, maximize = node.args
    params, grads, ms, vs, steps, mus = _slices(inputs, n_hyper, n, 6)
    _need_contiguous([*params, *grads, *ms, *vs], "parameters and state")
    flags = (decoupled, maximize)
    _counted_update(
        "nadam",
        params,
        grads,
        (ms, vs, mus),
        steps,
        inputs[:n_hyper],
        hidx,
        flags,
        prepare="nadam_mu",
        found_inf=_found_inf(_kopt._optim.NADAM, node, inputs),
    )


def _slices(inputs, n_hyper, n, k):
    """The k lists of n tensors that follow the hyperparameter tensors."""
    return [inputs[n_hyper + j * n : n_hyper + (j + 1) * n] for j in range(k)]


def _counted_update(kernel, params, grads, states, steps, hyp, hidx, flags, prepare=None, found_inf=0):
    """The counted updates (Adam, RMSprop, Adadelta, Adagrad, Adamax, NAdam) on the device: one table entry per
    parameter (parameter, gradient, three state slots, 0 where a state is absent, step counter, hyperparameter
    row, and the third slot's dtype where it holds a scalar of its own), the step counters bumped by
    opt_step_incr, then the `prepare` kernel once per table if given (NAdam's mu_product), then `kernel` over all
    chunks with its flags; each launch also takes `found_inf` (an address or 0, see _found_inf)."""
    entries = []
    aux = states[2]
    for i in range(len(params)):
        h = hyp[hidx[i]]
        entries.append(
            (
                addr(params[i]),
                addr(grads[i]),
                *(addr(st[i]) if st[i] is not None else 0 for st in states),
                addr(steps[i]),
                addr(h),
                params[i].numel(),
                _f64(grads[i]),
                _f64(steps[i]),
                _f64(h),
                _f64(aux[i]) if prepare and aux[i] is not None else 0,
            )
        )
    groups = _multi_tensor(entries, params)
    for code, tab, chunks, n_chunks, n_t in groups:
        launch(
            "optim", "opt_step_incr", grid1(n_t), (BLOCK,), Params().ptr(tab.address).i32(n_t).ptr(found_inf)
        )
        if prepare:
            launch("optim", prepare, grid1(n_t), (BLOCK,), Params().ptr(tab.address).i32(n_t).ptr(found_inf))
        p = Params().ptr(tab.address).ptr(chunks.address)
        for f in flags:
            p.i32(1 if f else 0)
        p.ptr(found_inf)
        launch("optim", f"{kernel}_{SUF[code]}", (n_chunks,), (BLOCK,), p)
    _count_empty_steps(params, steps, {g[0] for g in groups}, entries, prepare, found_inf)


def _count_empty_steps(params, steps, launched, entries=None, prepare=None, found_inf=0):
    """A parameter with zero elements still counts a step (and, with `prepare`, still runs it), as on the CPU.
    opt_step_incr already counted it when its dtype's table was launched (`launched`: those dtype codes); a table
    of empty parameters only is not."""
    for i, (p_, st) in enumerate(zip(params, steps)):
        if p_.numel() == 0 and p_.dtype.code not in launched:
            if prepare:
                tab = _device_bytes(abi.OPT_ENTRY.pack(*entries[i]))
            else:
                tab = _device_bytes(abi.OPT_ENTRY.pack(0, 0, 0, 0, 0, addr(st), 0, 0, 0, _f64(st), 0, 0))
            launch("optim", "opt_step_incr", (1,), (32,), Params().ptr(tab.address).i32(1).ptr(found_inf))
            if prepare:
                launch("optim", prepare, (1,), (32,), Params().ptr(tab.address).i32(1).ptr(found_inf))


# ---- random -------------------------------------------------------------------------------------------------


def philox_fill(kind, dtype_code, seed, offset, address, n, p1, p2):
    """Device twin of kernels.cpu._kernels.philox_fill: fill n elements at a device address from the Philox
    stream (seed, offset); same numbers as the CPU for the same arguments. Returns the blocks consumed."""
    if kind == "u32":
        blocks, name = (n + 3) // 4, "philox_u32"
    elif kind == "uniform":
        blocks = (n + 3) // 4 if dtype_code == F32 else (n + 1) // 2
        name = f"philox_uniform_{SUF[dtype_code]}"
    elif kind == "normal":
        blocks, name = (n + 1) // 2, f"philox_normal_{SUF[dtype_code]}"
    else:
        raise ValueError(f"unknown distribution {kind!r}")
    if kind != "u32" and dtype_code not in (F32, F64):
        raise ValueError(f"{kind} draws are float32 or float64, got dtype code {dtype_code}")
    if n == 0:
        return blocks
    bind = graphs.binding()
    if bind is not None:  # a captured plan's random step, run for its (seed, offset) only
        bind.take(seed, offset)
        return blocks
    cap = graphs.active()
    if cap is not None:
        # in a CUDA graph the kernel reads (seed, offset) from a slot written before each replay
        p = Params().ptr(cap.rng_slot(seed, offset)).ptr(address).i64(n)
        name += "_devstate"
    else:
        p = Params().u64(seed).u64(offset).ptr(address).i64(n)
    if kind != "u32":
        p.scalar(dtype_code, p1).scalar(dtype_code, p2)
    launch("random", name, grid1(blocks), (BLOCK,), p)
    return blocks


# ---- table --------------------------------------------------------------------------------------------------

NN = {
    "matmul": matmul, "addmm": addmm,
    "softmax": softmax, "log_softmax": softmax,
    "softmax_backward": softmax_backward, "log_softmax_backward": softmax_backward,
    "cross_entropy": cross_entropy, "cross_entropy_backward": cross_entropy_backward, "nll_loss": nll_loss,
    "loss_coeffs": loss_coeffs,
    "embedding": embedding, "embedding_backward": embedding_backward, "one_hot": one_hot,
    "layer_norm": layer_norm, "layer_norm_backward": layer_norm_backward,
    "conv2d": conv2d, "conv2d_backward_input": conv2d_backward_input,
    "conv2d_backward_weight": conv2d_backward_weight,
    "max_pool2d": max_pool2d, "max_pool2d_backward": max_pool2d_backward, "max_pool2d_gather": pool_gather,
    "avg_pool2d": avg_pool2d, "avg_pool2d_backward": avg_pool2d_backward,
    "sgd_update": sgd_update, "adam_update": adam_update, "rmsprop_update": rmsprop_update,
    "adadelta_update": adadelta_update, "adagrad_update": adagrad_update, "adamax_update": adamax_update,
    "nadam_update": nadam_update,
    "binary_cross_entropy": binary_cross_entropy, "binary_cross_entropy_backward": binary_cross_entropy_backward,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits,
    # the same lookup as embedding; only its backward rule differs (scale_grad_by_freq)
    "embedding_scale_grad_by_freq": embedding,
    "flash_attention": flash_attention, "flash_attention_backward": flash_attention_backward_op,
}  # fmt: skip

# fused group kernels (graph/fusion.py signature: kernel(root_node, inputs, outputs, args))
FUSED = {"addmm_act": addmm_act}


class _ArgsNode:
    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args


def fused_cross_entropy(node, inputs, outputs, args):
    """Fused group kernel of log_softmax + nll_loss: cross_entropy on the logits (args as the CPU rule builds
    them: kind, ignore_index, reduction, label smoothing)."""
    cross_entropy(_ArgsNode(args), inputs, outputs)


# CUDA kernel of each fusion rule (ops/fusion_rules.py), by rule name; graph/fusion.py swaps it in for groups
# on CUDA nodes (the rules' own builds return CPU kernels). A rule missing here runs unfused on CUDA.
FUSED_RULES = {
    "addmm_relu": addmm_act,
    "matmul_bias_relu": addmm_act,
    "matmul_bias": addmm_act,
    "addmm_gelu": addmm_act,
    "matmul_bias_gelu": addmm_act,
    "addmm_gelu_tanh": addmm_act,
    "matmul_bias_gelu_tanh": addmm_act,
    "log_softmax_nll": fused_cross_entropy,
}

__all__ = [
    "NN",
    "FUSED",
    "FUSED_RULES",
    "gemm",
    "flash_attention_forward",
    "flash_attention_backward",
    "philox_fill",
    "not_implemented",
    "bcast_strides",
]
