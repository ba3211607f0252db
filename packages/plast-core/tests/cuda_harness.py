"""The CPU-side reference harness of the CUDA backend.

1. ``capture(fn)`` runs plast code on the CPU with every CPU kernel wrapped: each call records the op's node
   (name and arguments), its input and output tensors, and the bytes of their memory before and after the
   kernel ran. Fusion is turned off while capturing, so every primitive is seen by itself.
2. ``dry_run(calls, signatures)`` feeds the recorded calls to the CUDA launchers with the GPU replaced by a
   recorder: no kernel runs, but every launch is checked against the kernel's real parameter list (read from
   nvcc's PTX): the kernel exists, and the packed parameters have the right count, sizes and offsets. This runs
   on any machine with nvcc and catches launcher/kernel mismatches without a GPU.
3. ``replay(call)`` (GPU only) copies a recorded call's inputs to the device with their exact strides and
   offsets, runs the CUDA kernel, and compares its outputs (and, for in-place ops, its inputs) with what the
   CPU kernel produced.

``workload()`` is a representative set of plast computations (forward and backward) that touches most rows of
the op table; ``coverage()`` says which CUDA kernels it reaches.
"""

import contextlib
import os
import re

import numpy as np

import plast._core.cuda_driver as cuda_driver
from plast.kernels.cuda import loader

# ---- capture ------------------------------------------------------------------------------------------------


class Call:
    """One recorded CPU kernel call."""

    __slots__ = ("name", "node", "inputs", "outputs", "in_before", "in_after", "out_after")

    def __init__(self, name, node, inputs, outputs):
        self.name, self.node, self.inputs, self.outputs = name, node, list(inputs), list(outputs)
        self.in_before = self.in_after = self.out_after = None

    def __repr__(self):
        shapes = ", ".join(f"{t.dtype.name}{tuple(t._shape)}" for t in self.inputs)
        return f"<Call {self.name}({shapes}) args={self.node.args!r}>"


def _bytes(t):
    st = t._storage
    if st is None or st.nbytes == 0:
        return b""
    return bytes(memoryview(st))


class _ArgsNode:
    __slots__ = ("op", "args")

    def __init__(self, op, args):
        self.op, self.args = op, args


@contextlib.contextmanager
def _capturing(calls):
    from plast.ops.registry import OPS

    saved = {}
    for name, op in OPS.items():
        k = op.kernels.get("cpu")
        if k is None or op.view:
            continue
        saved[name] = k

        def wrapped(node, inputs, outputs, _k=k, _name=name, _op=op):
            call = Call(_name, _ArgsNode(_op, node.args), inputs, outputs)
            call.in_before = [_bytes(t) for t in inputs]
            res = _k(node, inputs, outputs)
            call.in_after = [_bytes(t) for t in inputs]
            call.out_after = [_bytes(t) for t in outputs]
            calls.append(call)
            return res

        op.kernels["cpu"] = wrapped
    old = os.environ.get("PLAST_FUSION")
    os.environ["PLAST_FUSION"] = "0"
    try:
        yield calls
    finally:
        for name, k in saved.items():
            OPS[name].kernels["cpu"] = k
        if old is None:
            os.environ.pop("PLAST_FUSION", None)
        else:
            os.environ["PLAST_FUSION"] = old


def capture(fn):
    """Run fn() on the CPU and return the kernel calls it made (see Call)."""
    calls = []
    with _capturing(calls):
        fn()
    return calls


# ---- the workload -------------------------------------------------------------------------------------------


def _segments():
    import plast

    def gen():
        return plast.Generator().manual_seed(1234)

    def pointwise():
        g = gen()
        a = plast.randn(4, 5, generator=g)
        b = plast.randn(5, generator=g)
        ai = plast.randint(-5, 6, (4, 5), generator=g)
        bi = plast.randint(1, 4, (5,), generator=g)
        outs = [
            a + b,
            a - b,
            a * b,
            a / b,
            plast.maximum(a, b),
            plast.minimum(a, b),
            plast.pow(a.abs(), b),
            plast.floor_divide(a, b),
            plast.remainder(a, b),
            plast.fmod(a, b),
            ai + bi,
            ai * bi,
            plast.floor_divide(ai, bi),
            plast.remainder(ai, bi),
            plast.fmod(ai, bi),
            plast.pow(ai, bi),
            plast.bitwise_and(ai, bi),
            plast.bitwise_or(ai, bi),
            plast.bitwise_xor(ai, bi),
            plast.bitwise_not(ai),
            a == b,
            a != b,
            a < b,
            a <= b,
            a > b,
            a >= b,
            plast.logical_and(a > 0, b > 0),
            plast.logical_or(a > 0, b > 0),
            plast.logical_xor(a > 0, b > 0),
            plast.logical_not(a > 0),
            plast.where(a > 0, a, b),
            plast.clamp(a, -0.5, 0.5),
            plast.clamp_min(a, 0.0),
            plast.isfinite(a),
            plast.isnan(a),
            plast.isinf(a),
            plast.floor(a),
            plast.ceil(a),
            plast.trunc(a),
            plast.round(a),
            plast.round(a, decimals=1),
            plast.exp2(a),
            plast.log2(a.abs() + 1),
            plast.log10(a.abs() + 1),
            plast.expm1(a),
            # issue 18's rows: new unary and binary codes through the same launchers, and frexp's own
            plast.asin(a.clamp(-1, 1)),
            plast.erfinv(a.clamp(-0.9, 0.9)),
            plast.digamma(a.abs() + 0.5),
            plast.i0(a),
            plast.atan2(a, b),
            plast.igamma(a.abs() + 0.1, b.abs()),
            plast.polygamma(2, a.abs() + 0.5),
            plast.gcd(ai, bi),
            plast.bitwise_right_shift(ai, bi),
            *plast.frexp(a),
            plast.sign(a),
            plast.sigmoid(a),
            plast.tanh(a),
            plast.erf(a),
            plast.relu(a),
            plast.sin(a),
            plast.cos(a),
            plast.exp(a),
            plast.log(a.abs() + 1),
            plast.log1p(a.abs()),
            plast.sqrt(a.abs()),
            plast.abs(ai),
            a.double() * 2,
            ai.float(),
            (a > 0).long(),
            a.transpose(0, 1) + 1,
            a[:, ::2] * 3,
        ]
        return outs

    def shape_ops():
        g = gen()
        a = plast.randn(3, 4, 5, generator=g)
        return [
            plast.cat([a, a * 2], 1),
            plast.tril(a[0]),
            plast.triu(a[0], 1),
            plast.flip(a, (0, 2)),
            a.permute(2, 0, 1).contiguous(),
            plast.stack([a, a]),
            plast.pad(a, (1, 2)),
            plast.roll(a, 1, 2),
        ]

    def reductions():
        g = gen()
        a = plast.randn(6, 7, 8, generator=g)
        ai = plast.randint(0, 5, (6, 7), generator=g)
        big = plast.randn(3, 3000, generator=g)
        return [
            a.sum(),
            a.sum((0, 2)),
            a.sum(1, keepdim=True),
            a.mean(2),
            plast.amax(a, 1),
            plast.amin(a, (0, 1)),
            a.max(2)[0],
            plast.argmax(a, 1),
            plast.argmin(a),
            plast.prod(a[:, :2, :3], 1),
            ai.sum(1),
            plast.all(ai > 0, 1),
            plast.any(ai > 3),
            plast.norm(a, 2.0, (1,)),
            plast.norm(a, 3.0, (2,)),
            plast.logsumexp(a, 2),
            plast.cumsum(a, 1),
            plast.cumsum(ai, 0),
            a.var(1),
            big.sum(1),
            big.amax(1),
            plast.argsort(a, 2),
            plast.argsort(a, 1, descending=True),
            plast.topk(a, 3, 2)[1],
            plast.sort(big, 1)[1],
        ]

    def indexing():
        g = gen()
        a = plast.randn(5, 6, generator=g, requires_grad=True)
        idx = plast.tensor([0, 2, 4, 2])
        out = [
            a[idx],
            a[:, idx],
            a[idx, idx],
            plast.index_select(a, 1, idx),
            plast.gather(a, 1, idx.reshape(2, 2)),
            plast.take_along_dim(a, plast.argsort(a, 1), 1),
        ]
        loss = sum((o * o).sum() for o in out)
        loss.backward()
        b = plast.zeros(5, 6)
        out.append(plast.index_put(b, (idx,), plast.ones(4, 6), accumulate=True))
        out.append(plast.scatter_add(b, 1, idx.reshape(1, 4).expand(5, 4), plast.ones(5, 4)))
        out.append(a.grad)
        return out

    def nn_ops():
        g = gen()
        x = plast.randn(4, 10, generator=g, requires_grad=True)
        t = plast.tensor([1, 0, 9, 3])
        w = plast.rand(10, generator=g) + 0.5
        losses = [
            plast.cross_entropy(x, t),
            plast.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
            plast.cross_entropy(x, plast.tensor([1, -100, 9, 3]), weight=w, reduction="none"),
            plast.nll_loss(plast.log_softmax(x, 1), t),
            plast.cross_entropy(x, plast.softmax(x * 2, 1)),
        ]
        y = plast.softmax(x, 1) * plast.randn(4, 10, generator=g)
        total = sum(lo.sum() for lo in losses) + y.sum() + plast.log_softmax(x, 0).sum()
        total.backward()
        emb = plast.randn(12, 6, generator=g, requires_grad=True)
        ids = plast.tensor([[1, 5, 11], [0, 5, 2]])
        e = plast.embedding(ids, emb)
        ln_w = plast.ones(6, requires_grad=True)
        ln_b = plast.zeros(6, requires_grad=True)
        h = plast.layer_norm(e, (6,), ln_w, ln_b)
        lin_w = plast.randn(4, 6, generator=g, requires_grad=True)
        lin_b = plast.randn(4, generator=g, requires_grad=True)
        z = plast.linear(h, lin_w, lin_b)
        z = plast.gelu(z, approximate="tanh") + plast.relu(z) + plast.silu(z)
        q = plast.randn(2, 2, 5, 8, generator=g, requires_grad=True)
        att = plast.scaled_dot_product_attention(q, q, q, is_causal=True)
        (z.sum() + att.sum() + plast.dropout(z, 0.5, generator=g).sum()).backward()
        oh = plast.one_hot(plast.tensor([0, 3, 1]), 4)
        return [x.grad, emb.grad, ln_w.grad, lin_w.grad, q.grad, oh]

    def bce_ops():
        g = gen()
        logits = plast.randn(4, 5, generator=g, requires_grad=True)
        probs = plast.sigmoid(logits)
        t = plast.rand(4, 5, generator=g)
        w = plast.rand(5, generator=g) + 0.5
        losses = [
            plast.binary_cross_entropy(probs, t),
            plast.binary_cross_entropy(probs, t, weight=w, reduction="sum"),
            plast.binary_cross_entropy(probs, (t > 0.5).float(), reduction="none"),
            plast.binary_cross_entropy_with_logits(logits, t),
            plast.binary_cross_entropy_with_logits(logits, t, weight=w, pos_weight=w * 2, reduction="sum"),
            plast.binary_cross_entropy_with_logits(logits.T, t.T, reduction="none"),
        ]
        sum(lo.sum() for lo in losses).backward()
        return losses + [logits.grad]

    def prod_max_ops():
        g = gen()
        x = plast.randn(3, 5, generator=g, requires_grad=True)
        with_zero = x * plast.tensor([1.0, 0.0, 1.0, 1.0, 1.0])
        (gx,) = plast.autograd.grad(with_zero.prod(1).sum() + x.prod(0).sum(), x, create_graph=True)
        (gx * gx).sum().backward()  # prod's second derivative
        ties = plast.tensor([[1.0, 3.0, 3.0], [2.0, 0.5, 2.0]], requires_grad=True)
        (ties.amax() + ties.amax(1).sum() + plast.amin(ties, 0).sum()).backward()
        emb = plast.randn(6, 3, generator=g, requires_grad=True)
        plast.embedding(plast.tensor([[1, 1, 4], [0, 1, 5]]), emb, scale_grad_by_freq=True).sum().backward()
        return [x.grad, ties.grad, emb.grad]

    def conv_ops():
        g = gen()
        x = plast.randn(2, 4, 9, 9, generator=g, requires_grad=True)
        w = plast.randn(6, 2, 3, 3, generator=g, requires_grad=True)
        b = plast.randn(6, generator=g, requires_grad=True)
        y = plast.conv2d(x, w, b, stride=2, padding=1, groups=2)
        p = plast.max_pool2d(y, 2, ceil_mode=True)
        a = plast.avg_pool2d(x, 3, stride=2, padding=1)
        (p.sum() + a.sum() + (y * y).sum()).backward()
        return [x.grad, w.grad, b.grad]

    def optim_ops():
        g = gen()
        ps = [plast.randn(5, 3, generator=g), plast.randn(7, generator=g)]
        gs = [plast.randn(5, 3, generator=g), plast.randn(7, generator=g)]
        ms = [plast.zeros(5, 3), plast.zeros(7)]
        vs = [plast.zeros(5, 3), plast.zeros(7)]
        steps = [plast.zeros((), dtype=plast.float64) for _ in ps]
        h = plast.tensor([1e-2, 0.9, 0.999, 1e-8, 0.01], dtype=plast.float64)
        # each update once without GradScaler's found_inf and once with it (set: the kernels skip)
        fis = [None, plast.ones(1)]
        for fi in fis:
            plast.adam_update_(ps, gs, ms, vs, steps, h, decoupled_weight_decay=True, found_inf=fi)
        bufs = [plast.zeros(5, 3), plast.zeros(7)]
        hs = plast.tensor([0.1, 0.9, 0.0, 0.0], dtype=plast.float64)
        for fi in fis:
            plast.sgd_update_(ps, gs, bufs, hs, nesterov=True, found_inf=fi)
        sqs, rsteps = [plast.zeros(5, 3), plast.zeros(7)], [plast.zeros((), dtype=plast.float64) for _ in ps]
        mbufs, gavgs = [plast.zeros(5, 3), plast.zeros(7)], [plast.zeros(5, 3), plast.zeros(7)]
        hr = plast.tensor([1e-2, 0.99, 1e-8, 0.01, 0.9], dtype=plast.float64)
        for fi in fis:
            plast.rmsprop_update_(
                ps, gs, sqs, rsteps, hr, momentum_buffers=mbufs, grad_avgs=gavgs, found_inf=fi
            )
            plast.rmsprop_update_(ps, gs, sqs, rsteps, hr, maximize=True, found_inf=fi)
        s1, s2 = [plast.zeros(5, 3), plast.zeros(7)], [plast.zeros(5, 3), plast.zeros(7)]
        st = [plast.zeros((), dtype=plast.float64) for _ in ps]
        mus = [plast.ones(()), plast.ones((), dtype=plast.float64)]
        for fi in fis:
            plast.adadelta_update_(
                ps, gs, s1, s2, st, plast.tensor([1.0, 0.9, 1e-6, 0.01], dtype=plast.float64), found_inf=fi
            )
            hg = plast.tensor([0.01, 0.01, 0.0, 1e-10], dtype=plast.float64)
            plast.adagrad_update_(ps, gs, s1, st, hg, found_inf=fi)
            plast.adamax_update_(ps, gs, s1, s2, st, h, maximize=True, found_inf=fi)
            hn = plast.tensor([2e-3, 0.9, 0.999, 1e-8, 0.01, 4e-3], dtype=plast.float64)
            plast.nadam_update_(ps, gs, s1, s2, st, mus, hn, decoupled_weight_decay=True, found_inf=fi)
        return ps

    def extra():
        g = gen()
        a = plast.randn(4, 6, generator=g, requires_grad=True)
        b = plast.randn(6, 3, generator=g, dtype=plast.float64)
        c = plast.addmm(plast.randn(3, generator=g), a, plast.randn(6, 3, generator=g), beta=0.5, alpha=2.0)
        v, _ = plast.topk(a, 2, 1)
        (c.sum() + v.sum() + a.std(1).sum()).backward()
        d = plast.matmul(b.transpose(0, 1), b).sum() + plast.softmax(b, 0).sum()
        bm = plast.matmul(plast.randn(2, 3, 4, 5, generator=g), plast.randn(3, 5, 2, generator=g))
        return [a.grad, d, bm, plast.log_softmax(b, 1)]

    def last_rows():
        # the op table's last CUDA rows: scatter_reduce, multinomial, reduce_svd, reduce_prod_excl
        g = gen()
        x = plast.randn(4, 6, generator=g)
        idx = plast.randint(0, 4, (3, 6), generator=g)
        src = plast.randn(3, 6, generator=g)
        xi = plast.randint(-5, 6, (4, 6), generator=g)
        srci = plast.randint(-5, 6, (3, 6), generator=g)
        outs = [
            x.scatter_reduce(0, idx, src, r, include_self=inc)
            for r in ("sum", "prod", "mean", "amax", "amin")
            for inc in (True, False)
        ]
        outs.append(xi.scatter_reduce(1, idx[:, :4], srci[:, :4], "mean"))
        outs.append(xi.T.scatter_reduce(0, idx.T, srci.T, "amin", include_self=False))
        outs.append((xi > 0).scatter_reduce(0, idx, srci > 0, "sum"))
        w = plast.rand(3, 7, generator=g) * (plast.arange(7) % 3 != 0)  # some zero weights
        outs.append(plast.multinomial(w, 5, replacement=True, generator=g))
        outs.append(plast.multinomial(w.double(), 4, generator=g))
        a = plast.randn(2, 5, 3, generator=g, requires_grad=True)
        nrm = plast.linalg.matrix_norm(a, "nuc").sum() + plast.linalg.matrix_norm(a.transpose(1, 2), 2).sum()
        nrm.backward()
        p = plast.randn(3, 4, generator=g, requires_grad=True)
        (g1,) = plast.autograd.grad(p.prod(1).sum(), p, create_graph=True)
        (g2,) = plast.autograd.grad((g1 * g1).sum(), p, create_graph=True)
        (g2 * g2).sum().backward()  # prod's third derivative
        return outs + [a.grad, p.grad]

    def rnn_ops():
        # the fused cells forward and backward: LSTM with both outputs used, with only h and with only c (absent
        # gradients are null pointers), strided gates (a column slice), GRU in float32 and float64; split_copy
        # (how the layers cut the sequence's gate projection into steps), along dims 0 and 1
        g = gen()
        seq = plast.randn(6, 4, generator=g, requires_grad=True)
        steps = plast.split_copy(seq, 2) + plast.split_copy(seq, [1, 3], 1)
        sum((s * (i + 1)).sum() for i, s in enumerate(steps)).backward()
        outs = [*steps, seq.grad]
        for dt, used in ((plast.float32, "hc"), (plast.float32, "h"), (plast.float64, "c")):
            gx = plast.randn(3, 10, generator=g, dtype=dt, requires_grad=True)
            gh = plast.randn(3, 8, generator=g, dtype=dt, requires_grad=True)
            c0 = plast.randn(3, 2, generator=g, dtype=dt, requires_grad=True)
            h, c = plast.fused_lstm_cell(gx[:, 1:9], gh, c0)
            loss = (h * h).sum() if "h" in used else 0.0
            loss = loss + (c * c).sum() if "c" in used else loss
            loss.backward()
            outs += [h, c, gx.grad, gh.grad, c0.grad]
        for dt in (plast.float32, plast.float64):
            gx, gh = (plast.randn(4, 6, generator=g, dtype=dt, requires_grad=True) for _ in range(2))
            h0 = plast.randn(4, 2, generator=g, dtype=dt, requires_grad=True)
            h = plast.fused_gru_cell(gx, gh, h0)
            (h * h).sum().backward()
            outs += [h, gx.grad, gh.grad, h0.grad]
        return outs

    return [
        ("pointwise", pointwise),
        ("extra", extra),
        ("last_rows", last_rows),
        ("shape", shape_ops),
        ("reductions", reductions),
        ("indexing", indexing),
        ("nn", nn_ops),
        ("bce", bce_ops),
        ("prod_max", prod_max_ops),
        ("conv", conv_ops),
        ("optim", optim_ops),
        ("rnn", rnn_ops),
    ]


def workload(strict=False):
    """Run the representative workload on the CPU; returns (calls, errors) where errors lists the segments
    the installed plast could not run (its API moves; the harness reports, it does not hide them)."""
    import plast

    calls, errors = [], []
    for name, seg in _segments():

        def run(seg=seg):
            outs = seg()
            plast.forward(*[o for o in outs if isinstance(o, plast.Tensor)])

        try:
            calls += capture(run)
        except Exception as e:  # noqa: BLE001 -- reported to the caller
            if strict:
                raise
            errors.append((name, f"{type(e).__name__}: {e}"))
    return calls, errors


# ---- PTX signatures -----------------------------------------------------------------------------------------

_ENTRY = re.compile(r"\.(?:visible\s+)?\.entry\s+(\w+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)(?:\s+\.ptr(?:\s+\.\w+)*(?:\s+\.align\s+\d+)?)?\s+\w+(?:\[(\d+)\])?"
)
_SIZES = {
    "u8": 1,
    "s8": 1,
    "b8": 1,
    "u16": 2,
    "s16": 2,
    "u32": 4,
    "s32": 4,
    "b32": 4,
    "f32": 4,
    "u64": 8,
    "s64": 8,
    "b64": 8,
    "f64": 8,
}


def parse_ptx_signatures(ptx):
    """kernel name -> [(offset, size)] of its parameters, from PTX text."""
    out = {}
    for m in _ENTRY.finditer(ptx):
        params, off = [], 0
        for pm in _PARAM.finditer(m.group(2)):
            align, ty, count = pm.group(1), pm.group(2), pm.group(3)
            size = _SIZES[ty] * (int(count) if count else 1)
            al = int(align) if align else _SIZES[ty]
            off = (off + al - 1) // al * al
            params.append((off, size))
            off += size
        out[m.group(1)] = params
    return out


class _FakeFunction:
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name


class _FakeDriver:
    """Stands in for pycuda.driver: copies and memsets do nothing; device-to-host reads give zeros."""

    def memset_d8(self, address, value, n):
        pass

    def memcpy_htod(self, address, array):
        pass

    def memcpy_dtoh(self, array, address):
        array[...] = 0

    def memcpy_dtod(self, dst, src, n):
        pass


class _FakeAllocation:
    _next = 1 << 40

    def __init__(self, n):
        self.addr = _FakeAllocation._next
        _FakeAllocation._next += (n + 4095) // 4096 * 4096

    def __int__(self):
        return self.addr


class LaunchRecord:
    __slots__ = ("module", "kernel", "grid", "block", "fields", "nbytes", "problem")

    def __init__(self, module, kernel, grid, block, fields, nbytes):
        self.module, self.kernel, self.grid, self.block = module, kernel, grid, block
        self.fields, self.nbytes, self.problem = fields, nbytes, None


@contextlib.contextmanager
def fake_gpu(signatures=None):
    """Replace the GPU by a recorder (see module docstring); yields the list of LaunchRecords."""
    from plast.kernels.cuda import kernels
    from plast.memory import cuda as memory

    records = []

    def function(module, name):
        return _FakeFunction(module, name)

    def launch(func, grid, block, params, shared=0, stream=None):
        rec = LaunchRecord(
            func.module, func.name, tuple(grid), tuple(block), list(params.fields), len(params)
        )
        if signatures is not None:
            rec.problem = check_launch(signatures, rec)
        if any(int(g) <= 0 for g in grid) or any(int(b) <= 0 for b in block):
            rec.problem = f"empty launch grid={grid} block={block}"
        if int(np.prod(block)) > 1024:
            rec.problem = f"block {block} has more than 1024 threads"
        records.append(rec)

    fake_drv = _FakeDriver()
    saved = (loader.function, loader.launch, cuda_driver.driver, kernels._err_state.copy())
    loader.function, loader.launch, cuda_driver.driver = function, launch, lambda: fake_drv
    from plast.kernels.cuda import kernels_nn

    saved_tables = dict(kernels_nn._tables)
    dry_arenas = memory.make_arenas(allocator=_FakeAllocation, memset=lambda a, n: None)
    kernels._err_state.clear()
    own_arenas = memory.arenas
    memory.arenas = lambda: dry_arenas  # never touch core's arenas during a dry run
    try:
        yield records
    finally:
        loader.function, loader.launch, cuda_driver.driver = saved[0], saved[1], saved[2]
        memory.arenas = own_arenas
        kernels._err_state.clear()
        kernels._err_state.update(saved[3])
        kernels_nn._tables.clear()
        kernels_nn._tables.update(saved_tables)


def check_launch(signatures, rec):
    """None when the packed parameters match the kernel's PTX signature, else what differs."""
    mod = signatures.get(rec.module)
    if mod is None:
        return f"no module {rec.module!r}"
    sig = mod.get(rec.kernel)
    if sig is None:
        return f"module {rec.module!r} has no kernel {rec.kernel!r}"
    got = [(off, size) for off, size in rec.fields]
    if got != sig:
        return f"{rec.module}.{rec.kernel}: parameters packed as {got}, the kernel takes {sig}"
    return None


def dry_run(calls, signatures=None):
    """Run the CUDA launcher of every recorded call against the recorder; returns (records, failures) where
    failures are (call, message) for launchers that raised or launches that do not match their kernel."""
    from plast.kernels.cuda import table as cuda_table

    table = cuda_table.table()
    failures, records = [], []
    with fake_gpu(signatures) as recs:
        for call in calls:
            k = table.get(call.name)
            if k is None or getattr(k, "cuda_stub", False):
                continue
            start = len(recs)
            try:
                k(call.node, call.inputs, call.outputs)
            except NotImplementedError:
                continue
            except Exception as e:  # noqa: BLE001 -- collected for the report
                failures.append((call, f"{type(e).__name__}: {e}"))
            for r in recs[start:]:
                if r.problem:
                    failures.append((call, r.problem))
        records = list(recs)
    return records, failures


def coverage(calls):
    """(op names reached by `calls` that have a CUDA kernel, ... that are stubs, op names never reached)."""
    from plast.kernels.cuda import table as cuda_table
    from plast.ops.registry import OPS

    table = cuda_table.table()
    seen = {c.name for c in calls}
    real = sorted(n for n in seen if n in table and not getattr(table[n], "cuda_stub", False))
    stubs = sorted(n for n in seen if n not in real)
    never = sorted(n for n, op in OPS.items() if n not in seen and not op.view)
    return real, stubs, never


# ---- replay on a real GPU -----------------------------------------------------------------------------------


class DevTensor:
    """A device tensor with the attributes CUDA launchers read (the engine's CUDA tensors will have the same)."""

    __slots__ = ("_storage", "_shape", "_strides", "_offset", "dtype", "device")

    def __init__(self, storage, shape, strides, offset, dtype):
        self._storage, self._shape, self._strides, self._offset = (
            storage,
            tuple(shape),
            tuple(strides),
            offset,
        )
        self.dtype = dtype
        self.device = "cuda"

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)


def _to_device(t, data, arena):
    from plast.memory import cuda as memory

    st = arena.new(max(len(data), 1))
    if data:
        memory.from_host(st, np.frombuffer(data, dtype=np.uint8))
    return DevTensor(st, t._shape, t._strides, t._offset, t.dtype)


def _values(t, data):
    """The logical values of a tensor (its shape, strides and offset) from its storage bytes."""
    if t.numel() == 0:
        return np.empty(t._shape, dtype=t.dtype.np)
    base = np.frombuffer(data, dtype=t.dtype.np)
    return np.lib.stride_tricks.as_strided(
        base[t._offset :], shape=t._shape, strides=tuple(s * t.dtype.itemsize for s in t._strides)
    ).copy()


LOOSE = {
    "sum",
    "norm",
    "logsumexp",
    "cumsum",
    "matmul",
    "addmm",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "layer_norm",
    "layer_norm_backward",
    "cross_entropy",
    "nll_loss",
    "cross_entropy_backward",
    "softmax_backward",
    "log_softmax_backward",
    "embedding_backward",
    "index_backward",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "adam_update",
    "sgd_update",
}


def compare(name, got, want, rtol=1e-4, atol=1e-5):
    """None when `got` matches `want` (exact for integers and bools, allclose for floats), else a message."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[:3].tolist()
            return f"integer values differ at {bad}: got {got[tuple(np.array(bad).T)]}, want {want[tuple(np.array(bad).T)]}"
        return None
    if want.dtype == np.float64 and name not in LOOSE:
        rtol, atol = min(rtol, 1e-10), min(atol, 1e-12)
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        i = np.unravel_index(np.nanargmax(err), err.shape) if err.size else ()
        return f"max abs error {np.nanmax(err):.3g} at {i}: got {got[i]!r}, want {want[i]!r}"
    return None


def replay(call, *, rtol=1e-4, atol=1e-5):
    """Run a recorded call's CUDA kernel on the GPU and compare with the CPU's results. Returns None when they
    agree, else a message. View ops and stubs are skipped (None)."""
    from plast.kernels.cuda import table as cuda_table
    from plast.memory import cuda as memory

    k = cuda_table.table().get(call.name)
    if k is None or getattr(k, "cuda_stub", False):
        return None
    arena = memory.transient_arena()
    dev_in = [_to_device(t, b, arena) for t, b in zip(call.inputs, call.in_before)]
    dev_out = []
    for t in call.outputs:
        n = t.numel() * t.dtype.itemsize
        dev_out.append(DevTensor(arena.new(max(n, 1)), t._shape, _contig(t._shape), 0, t.dtype))
    k(call.node, dev_in, dev_out)
    problems = []
    gots = [memory.to_host(d._storage, t._shape, t.dtype.np) for t, d in zip(call.outputs, dev_out)]
    wants = [_values(_Flat(t), b) for t, b in zip(call.outputs, call.out_after)]
    if call.name == "reduce_svd":  # singular vectors are defined up to a sign per pair (u_j, vh_j)
        gots, wants = _svd_signs(*gots), _svd_signs(*wants)
    for i, (got, want) in enumerate(zip(gots, wants)):
        msg = compare(call.name, got, want, rtol, atol)
        if msg:
            problems.append(f"output {i}: {msg}")
    for i, (t, d) in enumerate(zip(call.inputs, dev_in)):
        if call.in_before[i] != call.in_after[i]:  # an in-place op: the mutated input must match too
            raw = memory.to_host(d._storage, (len(call.in_after[i]),), np.uint8)
            got = _values(t, raw.tobytes())
            want = _values(t, call.in_after[i])
            msg = compare(call.name, got, want, rtol, atol)
            if msg:
                problems.append(f"input {i} (written in place): {msg}")
    return "; ".join(problems) or None


def _svd_signs(u, s, vh):
    """U, S, Vh with each pair (u_j, vh_j) flipped so that u_j's entry of largest magnitude is positive."""
    if u.size == 0:
        return [u, s, vh]
    rows = np.argmax(np.abs(u), axis=-2)[..., None, :]
    sign = np.where(np.take_along_axis(u, rows, axis=-2) < 0, -1, 1).astype(u.dtype)
    return [u * sign, s, vh * np.swapaxes(sign, -1, -2)]


class _Flat:
    """An output seen as contiguous from offset 0 (outputs are freshly allocated and contiguous)."""

    __slots__ = ("_shape", "_strides", "_offset", "dtype")

    def __init__(self, t):
        self._shape, self._strides, self._offset, self.dtype = t._shape, _contig(t._shape), 0, t.dtype

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n


def _contig(shape):
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= max(shape[i], 1)
    return tuple(st)
