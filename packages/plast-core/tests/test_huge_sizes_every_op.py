"""Huge and overflowing sizes through EVERY elementwise, reduction and movement op (issue 23's done-when): eagerly,
under @plast.jit and through backward, each case in a capped child process (test_huge_sizes.run_cases: address
space 2 GiB, a timeout), accepting only a clean exception or a correct result.

The ops are enumerated, not listed: the elementwise ops are the public functions of ops/elementwise, ops/unary,
ops/pointwise and ops/composites (so an op added there is fuzzed without touching this file), the reductions those
of ops/reduce plus the softmax family, the movement ops those of ops/shape and ops/movement. How an op is called is
found by probing it on a small tensor (one to three tensor arguments; float32, then bool, then int64); movement ops
take their arguments from MOVE_CALLS, and an enumerated op that nothing fits fails test_every_op_is_fuzzed until
it gets a call or a reason in NOT_FUZZED.

Shapes expand a small base (its dims of size 2 or 3 are real, with distinct values, so a wrong element order
shows) to dims drawn from 0, 1, 2, 3, 2**31, 2**32, 2**62 and 2**63 - 1 (products past int64, strides past int64,
zero-size dims beside huge ones). Verdicts:
* every dim <= 3 ("small"): plast's result (values, shape; and the input's gradient in backward mode) equals
  torch's, or both raise;
* otherwise: a clean exception (RuntimeError, MemoryError, ValueError, TypeError, IndexError,
  NotImplementedError and their subclasses, whose message shows no negative byte count), or a result whose shape
  is torch's (torch on the meta device, which allocates nothing);
* a signal death, a hang (the child's timeout) or any other exception fails the test, naming the case.
A huge result is differentiated when it is empty (that costs nothing); otherwise backward runs on the small
cases only (the gradient of a huge realizable result would be computed for ever, in torch too). Known gaps are
named in GRADIENT_GAPS, with why, and compared forward only.
"""

import importlib
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_huge_sizes import run_cases

import plast

MAX = 2**63 - 1
DIMS = [0, 1, 2, 3, 2**31, 2**32, 2**62, MAX]
SMALL = 3  # a case whose dims are all at most this is computed and compared with torch

# ---- the ops ------------------------------------------------------------------------------------------------------

ELEMENTWISE_MODULES = ("elementwise", "unary", "pointwise", "composites")

# movement ops: how each is called (`y` is the expanded input, `nd` its number of dims, `lib` plast or torch)
MOVE_CALLS = {
    "cat": "lib.cat([y, y])",
    "concat": "lib.concat([y, y], dim=-1)",
    "concatenate": "lib.concatenate([y, y])",
    "stack": "lib.stack([y, y])",
    "hstack": "lib.hstack([y, y])",
    "vstack": "lib.vstack([y, y])",
    "chunk": "lib.chunk(y, 2, dim=-1)",
    "split": "lib.split(y, 2, dim=-1)",
    "split_copy": "lib.split_copy(y, 2, dim=-1)",
    "unbind": "lib.unbind(y, dim=-1)",
    "diagonal": "lib.diagonal(y)",
    "flatten": "lib.flatten(y)",
    "flip": "lib.flip(y, (0,))",
    "fliplr": "lib.fliplr(y)",
    "flipud": "lib.flipud(y)",
    "moveaxis": "lib.moveaxis(y, 0, -1)",
    "movedim": "lib.movedim(y, 0, -1)",
    "narrow": "lib.narrow(y, -1, 0, 1)",
    "roll": "lib.roll(y, 1, 0)",
    "select": "lib.select(y, -1, 0)",
    "squeeze": "lib.squeeze(y)",
    "tile": "lib.tile(y, (2,) + (1,) * (nd - 1) + (2,))",
    "tril": "lib.tril(y)",
    "triu": "lib.triu(y, 1)",
    "unflatten": "lib.unflatten(y, 0, (1, -1))",
    "unsqueeze": "lib.unsqueeze(y, 1)",
    "clone": "lib.clone(y)",
    "contiguous": "y.contiguous()",
    "expand": "y.expand(2, *y.shape)",
    "permute": "lib.permute(y, tuple(range(nd - 1, -1, -1)))",
    "reshape": "lib.reshape(y, (-1,))",
    "view": "y.view(-1)",
    "t": "lib.t(y)",
    "transpose": "lib.transpose(y, 0, -1)",
    "repeat": "y.repeat(2, *([1] * (nd - 1)))",
    "cast": "y.to(lib.float64)",
}
# elementwise ops whose probed call would be another op: where(y) alone is nonzero(y, as_tuple=True)
ELEMENTWISE_CALLS = {
    "where": "lib.where(y > 1.2, y, y2)",
    "mvlgamma": "lib.mvlgamma(y + 1.0, 2)",  # p (an int) is the second argument; y + 1 keeps y above (p - 1) / 2
}
# one Python tensor per slice: a huge split dim makes 2**31 objects (torch too); these run with that dim small
SLICES_LAST_DIM = {"chunk", "split", "split_copy", "unbind"}

# enumerated ops that are not fuzzed, and why
NOT_FUZZED = {
    "nonzero": "its output size depends on the values (a data-dependent shape, not a size computation)",
    "masked_fill": "needs a bool mask beside a float input (masked writes: test_torch_semantics_errors.py)",
    "multinomial": "random draws (no oracle); its sizes are those of the probabilities, fuzzed through sum",
    "topk": "needs k; its sizes are sort's, which is fuzzed",
    "allclose": "a Python bool: all() of isclose, which is fuzzed",
    "equal": "a Python bool: a shape check and all() of eq, which is fuzzed",
}

# known gaps, reported by this test and compared forward only until fixed
GRADIENT_GAPS = {}

REDUCE_EXTRA = ("softmax", "log_softmax", "logsumexp")


def _public(module):
    return [n for n in getattr(module, "__all__", ()) if hasattr(plast, n) and callable(getattr(plast, n))]


def _enumerate():
    from plast.ops import movement, reduce, shape

    elementwise = []
    for name in ELEMENTWISE_MODULES:
        try:
            elementwise += _public(importlib.import_module(f"plast.ops.{name}"))
        except ImportError:  # a module that does not exist (yet)
            pass
    reductions = _public(reduce) + [n for n in REDUCE_EXTRA if hasattr(plast, n)]
    moves = _public(shape) + _public(movement) + ["repeat"]
    dedup = lambda xs: list(dict.fromkeys(xs))  # noqa: E731
    return dedup(elementwise), dedup(reductions), dedup(moves)


def _base(lib, dtype, shape, flip=False):
    """A small tensor of `shape` with distinct values (positive, away from 0: log, sqrt and division are
    defined; ints from 1; bools alternating)."""
    n = math.prod(shape)
    if dtype == "float32":
        v = np.linspace(0.5, 2.0, max(n, 1), dtype=np.float32)[:n]
    elif dtype == "int64":
        v = (np.arange(n) % 3 + 1).astype(np.int64)
    else:
        v = np.arange(n) % 2 == 0
    v = v[::-1].copy() if flip else v
    return lib.tensor(v.reshape(shape))


def _probe():
    """{op: (kind, dtype, call)} for every enumerated op a call fits, and the enumerated ops nothing fits."""
    elementwise, reductions, moves = _enumerate()
    calls, unfit = {}, []
    small = {
        dt: [_base(plast, dt, (2, 3), flip=i % 2 == 1) for i in range(3)]
        for dt in ("float32", "bool", "int64")
    }
    for kind, names in (("elementwise", elementwise), ("reduce", reductions), ("move", moves)):
        for name in names:
            if name in NOT_FUZZED or name in calls:
                continue
            fixed = MOVE_CALLS if kind == "move" else ELEMENTWISE_CALLS
            if name in fixed or kind == "move":
                if name in fixed:
                    calls[name] = (kind, "float32", fixed[name])
                else:
                    unfit.append(name)
                continue
            forms = (
                [f"lib.{name}({', '.join(['y', 'y2', 'y3'][:k])})" for k in (1, 2, 3)]
                if kind == "elementwise"
                else [f"lib.{name}(y, dim=-1)"]
            )
            for dt in ("float32", "bool", "int64"):
                fit = None
                for form in forms:
                    y, y2, y3 = small[dt]
                    try:
                        r = eval(form, {"lib": plast, "y": y, "y2": y2, "y3": y3})
                        r = r[0] if isinstance(r, tuple) else r
                        r.numpy()
                    except Exception:  # noqa: BLE001 (this call does not fit; try the next)
                        continue
                    fit = form
                    break
                if fit:
                    calls[name] = (kind, dt, fit)
                    break
            else:
                unfit.append(name)
    return calls, unfit


CALLS, UNFIT = _probe()


def test_every_op_is_fuzzed():
    assert not UNFIT, (
        f"ops with no call the fuzz can make: {UNFIT}; give each a call (MOVE_CALLS) or a reason (NOT_FUZZED)"
    )
    kinds = {k for k, _, _ in CALLS.values()}
    assert kinds == {"elementwise", "reduce", "move"}
    # the table is read: the core of each kind is there (and more: every public op of the modules)
    assert {"add", "mul", "exp", "where", "pow", "eq", "logical_and", "clamp", "lerp"} <= set(CALLS)
    assert {"sum", "mean", "amax", "argmax", "cumsum", "var", "softmax", "logsumexp", "sort", "max"} <= set(
        CALLS
    )
    assert {
        "expand",
        "permute",
        "reshape",
        "tile",
        "repeat",
        "cat",
        "flip",
        "roll",
        "tril",
        "contiguous",
    } <= set(CALLS)
    assert len(CALLS) > 100, len(CALLS)


# ---- the child ----------------------------------------------------------------------------------------------------

# Each case: {"op", "dtype", "call", "shape", "base", "mode"}; the child prints one JSON result per case (through
# test_huge_sizes.run_cases): {"ok", "verdict"} or {"exc", "mro", "msg"}.
CHILD = r"""
import json, math, sys
import numpy as np
import torch
import plast

SMALL = @SMALL@
CLEAN = (RuntimeError, MemoryError, ValueError, TypeError, IndexError, NotImplementedError)

def base(lib, dtype, shape, flip=False, **kw):
    n = math.prod(shape)
    if dtype == "float32":
        v = np.linspace(0.5, 2.0, max(n, 1), dtype=np.float32)[:n]
    elif dtype == "int64":
        v = (np.arange(n) % 3 + 1).astype(np.int64)
    else:
        v = np.arange(n) % 2 == 0
    v = v[::-1].copy() if flip else v
    if kw.get("device") == "meta":
        return torch.empty(shape, dtype=getattr(torch, dtype), device="meta", requires_grad=kw.get("grad", False))
    t = lib.tensor(v.reshape(shape))
    return t.requires_grad_() if kw.get("grad") else t

def outputs(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]

class TorchNS:
    # torch's name for each op: torch.X, else torch.nn.functional.X (elu, softplus, hardtanh, ...)
    __name__ = "torch"

    def __getattr__(self, name):
        return getattr(torch, name) if hasattr(torch, name) else getattr(torch.nn.functional, name)

TORCH = TorchNS()

def call(lib, case, grad=False, meta=False):
    shape = tuple(case["shape"])
    kw = {"device": "meta"} if meta else {}
    x = base(lib, case["dtype"], tuple(case["base"]), grad=grad, **kw)
    xs = [x, base(lib, case["dtype"], tuple(case["base"]), True, **kw), base(lib, case["dtype"], tuple(case["base"]), **kw)]
    expr = case["call"]
    def f(a, b, c):
        env = {"lib": TORCH if lib is torch else lib, "y": a.expand(shape), "y2": b.expand(shape), "y3": c.expand(shape), "nd": len(shape)}
        return eval(expr, env)
    if case["mode"] == "jit" and lib is plast:
        f = plast.jit(f)
    return x, f(*xs)

def values(ts):
    out = []
    for t in ts:
        if not isinstance(t, (plast.Tensor, torch.Tensor)):
            out.append(("py", repr(t)))
            continue
        out.append((list(t.shape), t.detach().double().numpy() if t.dtype not in (plast.bool, torch.bool) else t.numpy().astype(float)))
    return out

def same(a, b):
    if len(a) != len(b):
        return f"{len(a)} outputs, torch {len(b)}"
    for (sa, va), (sb, vb) in zip(a, b):
        if sa != sb:
            return f"shape {sa}, torch {sb}"
        if sa == "py":
            continue
        if not np.allclose(va, vb, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"values {va.ravel()[:8].tolist()}, torch {vb.ravel()[:8].tolist()}"
    return None

def backward(x, outs):
    outs = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    if not outs:
        return None
    sum(o.double().sum() for o in outs).backward()
    return None if x.grad is None else x.grad.double().numpy()

def run(case):
    grad = case["mode"] == "backward" and case["dtype"] == "float32"
    if max(case["shape"], default=0) <= SMALL:
        want_g = None
        try:
            tx, tr = call(torch, case, grad)
            want = values(outputs(tr))
        except Exception as e:
            want = e
        if grad and not isinstance(want, Exception):
            try:
                want_g = backward(tx, outputs(tr))
            except Exception:  # torch has no derivative for it (floor_divide, ...): the forward is compared
                grad = False
        try:
            px, pr = call(plast, case, grad)
            got = values(outputs(pr))
            got_g = backward(px, outputs(pr)) if grad and not isinstance(want, Exception) else None
        except CLEAN as e:
            if isinstance(want, Exception):
                return {"verdict": "both raise"}
            return {"bad": f"plast raises {type(e).__name__}: {e}; torch gives a result"}
        if isinstance(want, Exception):
            return {"bad": f"torch raises {type(want).__name__}: {want}; plast gives {[v[0] for v in got]}"}
        diff = same(got, want)
        if diff:
            return {"bad": diff}
        if grad and want_g is not None:
            if got_g is None and not want_g.any():
                return {"verdict": "equal (no gradient: torch's is zeros)"}
            if got_g is None or got_g.shape != want_g.shape or not np.allclose(got_g, want_g, rtol=1e-4, atol=1e-5, equal_nan=True):
                return {"bad": f"gradient {None if got_g is None else got_g.ravel()[:8].tolist()}, torch {want_g.ravel()[:8].tolist()}"}
        return {"verdict": "equal"}
    try:
        _, mr = call(torch, case, meta=True)
        want = [list(t.shape) if isinstance(t, torch.Tensor) else None for t in outputs(mr)]
    except Exception:
        want = None
    px, pr = call(plast, case, grad)
    outs = outputs(pr)
    for t in outs:
        if isinstance(t, plast.Tensor):
            t._realized()
    got = [list(t.shape) if isinstance(t, plast.Tensor) else None for t in outs]
    if want is not None and got != want:
        return {"bad": f"shapes {got}, torch's (meta) {want}"}
    if grad and outs and all(isinstance(t, plast.Tensor) and t.numel() == 0 for t in outs):
        # empty outputs cost nothing to differentiate, whatever their dims: the input's gradient is zeros
        g = backward(px, outs)
        if g is not None and (list(g.shape) != list(px.shape) or g.any()):
            return {"bad": f"gradient of an empty result: {g.shape} {g.ravel()[:8].tolist()}"}
        return {"verdict": "empty result, zero gradient"}
    return {"verdict": "result"}

for i, case in enumerate(json.load(sys.stdin)):
    print(json.dumps({"i": i, "start": True}), flush=True)
    try:
        res = {"i": i, "ok": True, **run(case)}
    except Exception as e:
        res = {"i": i, "exc": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "msg": str(e)[:300]}
    print(json.dumps(res), flush=True)
""".replace("@SMALL@", str(SMALL))

CLEAN = {"RuntimeError", "MemoryError", "ValueError", "TypeError", "IndexError", "NotImplementedError"}


def _case(op, shape, mode):
    kind, dtype, call = CALLS[op]
    shape = list(shape)
    if op in SLICES_LAST_DIM and shape and shape[-1] > SMALL:
        shape[-1] = 2
    if op in ("tril", "triu", "diagonal", "t", "fliplr") and len(shape) < 2:
        shape = [2, *shape]  # (1-d: torch raises; the huge dims are the point here)
    n = math.prod(shape)
    if kind == "reduce" and n > 2**20 and n <= MAX:
        # a reduction's output has one dim fewer: reducing a realizable output of a huge input would compute
        # for ever (torch too), so the reduced (last) dim stays small unless the rest alone is huge
        rest = math.prod(shape[:-1])
        if rest * 8 < 2**31:
            shape[-1] = 3 if shape[-1] else 0
    base = [d if d <= SMALL else 1 for d in shape]
    if mode == "backward" and op in GRADIENT_GAPS:
        mode = "eager"
    return {"op": op, "dtype": dtype, "call": call, "shape": shape, "base": base, "mode": mode}


def _check(case, res):
    where = f"{case['op']}{tuple(case['shape'])} {case['mode']} ({case['call']} on {case['dtype']}) -> {res}"
    if res.get("ok"):
        assert "bad" not in res, where
        return
    assert set(res["mro"]) & CLEAN, f"not a clean exception: {where}"
    small = max(case["shape"], default=0) <= SMALL
    assert not small, f"plast raised on a small case torch did not get to compare: {where}"
    assert "-9" not in res["msg"] or "bytes" not in res["msg"], where  # a size that wrapped negative


def _run(cases):
    for case, res in zip(cases, run_cases(cases, child=CHILD, timeout=120)):
        _check(case, res)


OPS = sorted(CALLS)
MODES = ["eager", "jit", "backward"]
# fixed hostile shapes every op meets in every mode: products past int64, a 2**62-element allocation, strides past
# int64 beside a zero-size dim, the largest dim alone, and a small case against torch
FIXED = [(2**31, 2**31), (2**62, 2), (0, 2**62, 4), (MAX,), (3, 2)]


def test_every_op_on_fixed_hostile_shapes():
    # one child for every op, shape and mode (a child's start, torch's import included, is most of the cost)
    _run([_case(op, s, mode) for mode in MODES for op in OPS for s in FIXED])


shapes = st.lists(st.sampled_from(DIMS), min_size=1, max_size=3)


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(OPS), shapes, st.sampled_from(MODES)), min_size=250, max_size=250))
def test_fuzz_every_op_on_huge_shapes(batch):
    _run([_case(op, tuple(s), mode) for op, s, mode in batch])


def test_the_child_reports_wrong_results():
    # the harness itself: a result that differs from torch is reported as one, not passed over
    case = dict(_case("exp", (3, 2), "eager"), call="lib.exp(y) + (1 if lib.__name__ == 'plast' else 0)")
    [res] = run_cases([case], child=CHILD, timeout=120)
    assert res.get("ok") and "values" in res.get("bad", ""), res
    with pytest.raises(AssertionError):
        _check(case, res)
    json.dumps(case)
