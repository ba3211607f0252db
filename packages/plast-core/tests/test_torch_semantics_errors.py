"""Issue 23, no silent wrong results: what torch refuses, plast refuses with torch's exception type, and what torch
computes, plast computes the same. torch is the oracle throughout: each case runs on both libraries.

Integers (overflowing Python ints, bool negation and subtraction, arange's step sign, repeated reduction dims,
assigned gradients), tensor hooks on leaves (eager, replayed backward, @plast.jit) and in-place ops on views of
leaves and on expanded tensors."""

import numpy as np
import pytest
import torch

import plast
from plast.autograd import backward_replay


def _outcome(fn, lib):
    """("raise", exception) or ("value", ndarray, dtype name) of fn(lib)."""
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 (any exception is an outcome to compare)
        return ("raise", e)
    arr = out.detach().numpy() if out is not None else None
    return ("value", arr, str(out.dtype).split(".")[-1])


def _same_as_torch(fn):
    """fn(plast) raises an instance of the exception type fn(torch) raises, or gives torch's values and dtype."""
    want, got = _outcome(fn, torch), _outcome(fn, plast)
    if want[0] == "raise":
        assert got[0] == "raise", f"torch raises {type(want[1]).__name__}: {want[1]}; plast gives {got[1:]}"
        assert isinstance(got[1], type(want[1])), (
            f"torch raises {type(want[1]).__name__}, plast {type(got[1]).__name__}: {got[1]}"
        )
        return got[1]
    assert got[0] == "value", f"torch gives {want[1]}, plast raises {got[1]!r}"
    assert got[2] == want[2]
    np.testing.assert_array_equal(got[1], want[1])
    return None


# ---- integers -------------------------------------------------------------------------------------------------

TENSOR_CASES = {
    "2**63": lambda m: m.tensor([2**63]),
    "2**64-1": lambda m: m.tensor([2**64 - 1]),
    "-2**63-1": lambda m: m.tensor([-(2**63) - 1]),
    "scalar 2**63": lambda m: m.tensor(2**63),
    "nested 2**63": lambda m: m.tensor([[1], [2**63]]),
    "bool and 2**63": lambda m: m.tensor([True, 2**63]),
    "as_tensor 2**63": lambda m: m.as_tensor([2**63]),
    "int64 2**63": lambda m: m.tensor([2**63], dtype=m.int64),
    "int32 2**63": lambda m: m.tensor([2**63], dtype=m.int32),
    "2**63-1": lambda m: m.tensor([2**63 - 1, -(2**63)]),
    "float and 2**63": lambda m: m.tensor([1.5, 2**63]),
    "float and 2**64": lambda m: m.tensor([1.5, 2**64]),
    "2**64 as float32": lambda m: m.tensor([2**64], dtype=m.float32),
    "2**70 as float64": lambda m: m.tensor([2**70, 3], dtype=m.float64),
    "2**63 as bool": lambda m: m.tensor([2**63, 0], dtype=m.bool),
    "int32 2**31": lambda m: m.tensor([2**31], dtype=m.int32),
    "int32 -2**31-1": lambda m: m.tensor([-(2**31) - 1], dtype=m.int32),
    "int32 bounds": lambda m: m.tensor([2**31 - 1, -(2**31)], dtype=m.int32),
    "int32 1e10": lambda m: m.tensor([1e10], dtype=m.int32),
    "int32 -2.5": lambda m: m.tensor([-2.5, 7.9], dtype=m.int32),
    "int64 nan": lambda m: m.tensor([float("nan")], dtype=m.int64),
    "int64 inf": lambda m: m.tensor([1.0, float("-inf")], dtype=m.int64),
    "int64 1e19": lambda m: m.tensor([1e19], dtype=m.int64),
    "full 2**63": lambda m: m.full((2,), 2**63),
    "full -2**63": lambda m: m.full((2,), -(2**63)),
    "full int32 2**40": lambda m: m.full((2,), 2**40, dtype=m.int32),
    "full int64 nan": lambda m: m.full((2,), float("nan"), dtype=m.int64),
    "full int32 1e10": lambda m: m.full((2,), 1e10, dtype=m.int32),
    "full float32 2**63": lambda m: m.full((2,), 2**63, dtype=m.float32),
}


@pytest.mark.parametrize("case", list(TENSOR_CASES))
def test_python_ints_past_the_dtype_raise_as_in_torch(case):
    err = _same_as_torch(TENSOR_CASES[case])
    if case in ("2**63", "2**64-1", "nested 2**63"):
        assert "Overflow when unpacking long long" in str(err)  # torch's words; plast gave -2**63, -1, floats


def test_random_ints_near_the_bounds_round_trip(rng):
    for dtype, bits in ((plast.int64, 63), (plast.int32, 31)):
        lo, hi = -(2**bits), 2**bits - 1
        vals = [int(v) for v in rng.integers(lo, hi, size=50, endpoint=True)] + [lo, hi, 0, -1]
        assert plast.tensor(vals, dtype=dtype).tolist() == vals
        assert plast.tensor([vals]).tolist() == [vals]


BOOL_CASES = {
    "neg": lambda m: -m.tensor([True, False]),
    "neg()": lambda m: m.tensor([True, False]).neg(),
    "neg 0-d": lambda m: -m.tensor(True),
    "1 - mask": lambda m: 1 - m.tensor([True, False]),
    "mask - 1": lambda m: m.tensor([True, False]) - 1,
    "mask - mask": lambda m: m.tensor([True]) - m.tensor([False]),
    "float - mask": lambda m: m.tensor([1.0, 2.0]) - m.tensor([True, False]),
    "float - True": lambda m: m.tensor([1.0, 2.0]) - True,
    "sub_ mask": lambda m: m.ones(2).sub_(m.tensor([True, False])),
    "rsub": lambda m: m.rsub(m.tensor([True]), 1) if hasattr(m, "rsub") else -m.tensor([True]),
    # still allowed
    "neg int": lambda m: -m.tensor([1, -2]),
    "mask * -1": lambda m: m.tensor([True, False]) * -1,
    "int - int": lambda m: m.tensor([3]) - m.tensor([5]),
    "invert": lambda m: ~m.tensor([True, False]),
}


@pytest.mark.parametrize("case", list(BOOL_CASES))
def test_bool_negation_and_subtraction_raise_as_in_torch(case):
    err = _same_as_torch(BOOL_CASES[case])
    if err is not None:
        assert "bool tensor" in str(err) and "is not supported" in str(err)


ARANGE_CASES = {
    "negative step upwards": lambda m: m.arange(0, 10, -1),
    "positive step downwards": lambda m: m.arange(10, 0, 1),
    "float negative step": lambda m: m.arange(0.0, 1.0, -0.5),
    "empty with either sign": lambda m: m.arange(0, 0, -1),
    "zero step": lambda m: m.arange(0, 10, 0),
    "nan end": lambda m: m.arange(0, float("nan")),
    "inf end": lambda m: m.arange(0, float("inf")),
    "downwards": lambda m: m.arange(10, 0, -3),
    "float downwards": lambda m: m.arange(1.0, -1.0, -0.25),
}


@pytest.mark.parametrize("case", list(ARANGE_CASES))
def test_arange_step_sign_as_in_torch(case):
    _same_as_torch(ARANGE_CASES[case])


def test_arange_random_ranges_match_torch(rng):
    for _ in range(40):
        start, end = (int(v) for v in rng.integers(-20, 20, size=2))
        step = int(rng.integers(1, 5)) * (1 if end >= start else -1)
        _same_as_torch(lambda m, a=(start, end, step): m.arange(*a))


REDUCTIONS = {
    "sum": lambda x, d: x.sum(dim=d),
    "mean": lambda x, d: x.mean(dim=d),
    "amax": lambda x, d: x.amax(dim=d),
    "amin": lambda x, d: x.amin(dim=d),
    "var": lambda x, d: x.var(dim=d),
    "std": lambda x, d: x.std(dim=d),
    "logsumexp": lambda x, d: x.logsumexp(dim=d),
    "norm": lambda x, d: x.norm(dim=d),
    "all": lambda x, d: (x > 0).all(dim=d),
    "any": lambda x, d: (x > 0).any(dim=d),
    "squeeze": lambda x, d: x.squeeze(d),
}


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dims", [(0, 0), (1, -1), (0, -2), (0, 1, 0)])
def test_repeated_dims_raise_as_in_torch(op, dims):
    if op == "norm" and len(dims) > 2:
        pytest.skip("torch's norm over 3 dims is a matrix norm's error, not this one")
    data = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    err = _same_as_torch(lambda m: REDUCTIONS[op](m.tensor(data), dims))
    assert "appears multiple times in the list of dims" in str(err)


@pytest.mark.parametrize("op", [k for k in REDUCTIONS if k != "squeeze"])
def test_distinct_dims_still_reduce_as_in_torch(op, rng):
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for dims in [(0, 2), (-1, 0), (1,), (2, 1, 0)][: 3 if op == "norm" else 4]:
        got = REDUCTIONS[op](plast.tensor(data), dims).numpy()
        want = REDUCTIONS[op](torch.tensor(data), dims).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # a 0-d tensor takes dim 0 or -1 once, not both
    _same_as_torch(lambda m: REDUCTIONS[op](m.tensor(2.0), (0, -1)))


# repeated dims where each must be distinct: torch raises RuntimeError; plast's RepeatedDimError is a RuntimeError
# and a ShapeError (a ValueError), so code that caught plast's ValueError before keeps working
REPEATED = {
    "flip": lambda m, x: x.flip((0, 0)),
    "flip_neg": lambda m, x: x.flip((1, -2)),
    "permute": lambda m, x: x.permute(0, 0, 1),
    "permute_neg": lambda m, x: x.permute(2, -1, 0),
    "movedim_source": lambda m, x: x.movedim((0, 0), (0, 1)),
    "movedim_destination": lambda m, x: x.movedim((0, 1), (1, 1)),
    "movedim_neg": lambda m, x: x.movedim((0, -3), (1, 2)),
    "matrix_norm": lambda m, x: m.linalg.matrix_norm(x, dim=(0, 0)),
    "matrix_norm_neg": lambda m, x: m.linalg.matrix_norm(x, dim=(1, -2)),
}


@pytest.mark.parametrize("case", list(REPEATED))
def test_repeated_movement_and_matrix_dims_raise_as_in_torch(case):
    data = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    err = _same_as_torch(lambda m: REPEATED[case](m, m.tensor(data)))
    assert isinstance(err, RuntimeError) and isinstance(err, ValueError), type(err).__mro__
    assert isinstance(err, plast.errors.RepeatedDimError), type(err)
    assert "repeat" in str(err) or "multiple times" in str(err) or "must be different" in str(err), err


def test_distinct_movement_dims_still_match_torch():
    data = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)
    for fn in [
        lambda m, x: x.flip((0, -1)),
        lambda m, x: x.permute(2, 0, 1),
        lambda m, x: x.movedim((0, -1), (2, 0)),
        lambda m, x: m.linalg.matrix_norm(x, dim=(-1, 0)),
    ]:
        _same_as_torch(lambda m, fn=fn: fn(m, m.tensor(data)).contiguous())
    # a wrong count of dims stays a plain ShapeError
    with pytest.raises(plast.errors.ShapeError, match="not a permutation"):
        plast.ones(2, 3).permute(0)


GRAD_CASES = {
    "wrong size": lambda m, x: m.ones(7),
    "int64": lambda m, x: m.ones(4, dtype=m.int64),
    "float64": lambda m, x: m.ones(4, dtype=m.float64),
    "2-d": lambda m, x: m.ones(4, 1),
    "not a tensor": lambda m, x: [1.0, 1.0, 1.0, 1.0],
    "matching": lambda m, x: m.full((4,), 3.0),
    "None": lambda m, x: None,
}


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_assigned_grad_is_checked_as_in_torch(case):
    def assign(m):
        x = m.ones(4, requires_grad=True)
        x.grad = GRAD_CASES[case](m, x)
        return x.grad if x.grad is not None else m.zeros(0)

    _same_as_torch(assign)


def test_a_rejected_grad_leaves_the_old_one_and_del_clears_it():
    x = plast.ones(4, requires_grad=True)
    (x * 2).sum().backward()
    with pytest.raises(
        RuntimeError, match="assign a gradient of size '\\[3\\]' to a tensor of size '\\[4\\]'"
    ):
        x.grad = plast.ones(3)
    assert x.grad.tolist() == [2.0] * 4
    del x.grad
    assert x.grad is None


# ---- tensor hooks ---------------------------------------------------------------------------------------------


def _hooked_steps(m, steps, remove_after=None):
    """Steps of ``(w * x).sum()`` (twice through w) on a leaf with two hooks; the hooks' inputs and the grads."""
    w = m.tensor([1.0, -2.0, 3.0, 0.5], requires_grad=True)
    x = m.tensor([0.5, 1.0, -1.5, 2.0])
    seen = []
    h1 = w.register_hook(lambda g: seen.append(g.detach().numpy().copy()) or g * 10)
    h2 = w.register_hook(lambda g: g.clamp(-12.0, 12.0))
    out = []
    for i in range(steps):
        if i == remove_after:
            h1.remove()
        w.grad = None
        ((w * x).sum() + (w * w).sum()).backward()
        out.append(w.grad.numpy().copy())
    h2.remove()
    return out, seen


def test_leaf_hooks_change_the_gradient_before_it_is_accumulated_on_every_step():
    before = backward_replay.stats()["replays"]
    got, got_seen = _hooked_steps(plast, 6)
    want, want_seen = _hooked_steps(torch, 6)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_seen, want_seen, rtol=1e-6)
    assert len(got_seen) == 6  # called on every step: a hooked leaf is never replayed over
    assert backward_replay.stats()["replays"] == before
    # a removed hook stops, and the replays that follow give the unhooked gradient
    got, got_seen = _hooked_steps(plast, 7, remove_after=3)
    want, want_seen = _hooked_steps(torch, 7, remove_after=3)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(got_seen) == len(want_seen) == 3


def test_leaf_hook_accumulates_and_feeds_post_accumulate_hooks():
    res = {}
    for m in (plast, torch):
        x = m.ones(3, requires_grad=True)
        seen, post = [], []
        x.register_hook(lambda g, seen=seen: seen.append(g.tolist()) or g * 10)
        x.register_post_accumulate_grad_hook(lambda t, post=post: post.append(t.grad.tolist()))
        (x * 2 + x * 3).sum().backward()  # one call with the summed gradient
        (x * 2).sum().backward()  # accumulates the hooked 20 onto 50
        (gx,) = m.autograd.grad((x * 4).sum(), x)  # hooks see autograd.grad's captures too
        res[m] = (seen, post, x.grad.tolist(), gx.tolist())
    assert res[plast] == res[torch]


def test_hooks_that_change_size_dtype_or_type_raise_as_in_torch():
    def named(g):
        return g[:2]

    hooks = {
        "size": named,
        "dtype": lambda g: g.double(),
        "not a tensor": lambda g: 5,
        "broadcastable": lambda g: g.reshape(1, 4),
    }
    for what, hook in hooks.items():
        for leaf in (True, False):

            def run(m, hook=hook, leaf=leaf):
                x = m.ones(4, requires_grad=True)
                y = x if leaf else x * 2
                y.register_hook(hook)
                (y * 3).sum().backward()
                return x.grad

            err = _same_as_torch(run)
            if what == "size":
                assert "hook 'named' has changed the size of value" in str(err)
            if what == "dtype":
                assert "has changed the type of value" in str(err)


def test_a_non_leaf_hook_handle_removes_it():
    x = plast.ones(2, requires_grad=True)
    y = x * 2
    h = y.register_hook(lambda g: g * 100)
    h.remove()
    h.remove()  # twice is fine, as in torch
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        plast.ones(2).register_hook(lambda g: g)


def _train(m, jit, steps, hook_from=0, hook_until=None):
    """A linear fit whose parameter gradient is clipped by a hook (from step `hook_from` until `hook_until`)."""
    rng = np.random.default_rng(5)
    w = m.tensor(rng.standard_normal((6, 3)).astype(np.float32), requires_grad=True)
    x = m.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = m.tensor(rng.standard_normal((8, 3)).astype(np.float32))

    def step(x, y):
        w.grad = None
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with m.no_grad():
            w.sub_(w.grad * 0.5)
        return loss

    run = plast.jit(step) if jit else step
    losses, handle = [], None
    for i in range(steps):
        if i == hook_from:
            handle = w.register_hook(lambda g: g.clamp(-0.05, 0.05) * 2.0)
        if i == hook_until:
            handle.remove()
        losses.append(run(x, y).item())
    return np.array(losses), w.detach().numpy(), run


@pytest.mark.parametrize("window", [(0, None), (0, 4), (2, 5)])
def test_a_parameter_hook_clips_gradients_eagerly_and_under_jit_as_in_torch(window):
    want_l, want_w, _ = _train(torch, False, 8, *window)
    eager_l, eager_w, _ = _train(plast, False, 8, *window)
    jit_l, jit_w, step = _train(plast, True, 8, *window)
    np.testing.assert_allclose(eager_l, want_l, rtol=1e-5)
    np.testing.assert_allclose(eager_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(jit_l, eager_l)
    np.testing.assert_array_equal(jit_w, eager_w)
    # registering or removing a hook traces the step again (its plan replays the hooks' kernels as traced), unless
    # the step already has a plan for that state: (2, 5) goes back to the hook-free plan of its first two calls
    states = [window[0] <= i and (window[1] is None or i < window[1]) for i in range(8)]
    assert step.traces == len(set(states))


# ---- in-place ops on views ------------------------------------------------------------------------------------


def _view_of_leaf_cases():
    def view_mul(m):
        x = m.ones(4, requires_grad=True)
        v = x[0:2]
        v.mul_(2)
        return x

    def slice_mul(m):
        x = m.ones(4, requires_grad=True)
        x[0:2].mul_(2)
        return x

    def view_setitem(m):
        x = m.ones(4, requires_grad=True)
        x.view(2, 2)[0] = 3.0
        return x

    def transpose_add(m):
        x = m.ones(2, 3, requires_grad=True)
        x.t().add_(1.0)
        return x

    def no_grad_slice(m):
        x = m.ones(4, requires_grad=True)
        with m.no_grad():
            x[0:2].mul_(2)
            x[1:3].add_(1)
        return x.detach()

    def view_made_with_grad_written_under_no_grad(m):
        x = m.arange(4.0).requires_grad_()
        v = x[1:3]
        with m.no_grad():
            v.mul_(10)
            v.add_(1)
        return x.detach()

    def no_grad_view_then_backward(m):
        x = m.arange(4.0).requires_grad_()
        with m.no_grad():
            x.view(2, 2)[1].fill_(5.0)
        (x * x).sum().backward()
        return x.grad

    return {
        f.__name__: f
        for f in (
            view_mul,
            slice_mul,
            view_setitem,
            transpose_add,
            no_grad_slice,
            view_made_with_grad_written_under_no_grad,
            no_grad_view_then_backward,
        )
    }


VIEW_OF_LEAF = _view_of_leaf_cases()


@pytest.mark.parametrize("case", list(VIEW_OF_LEAF))
def test_in_place_on_a_view_of_a_leaf_as_in_torch(case):
    err = _same_as_torch(VIEW_OF_LEAF[case])
    if err is not None:
        assert "a view of a leaf Variable that requires grad is being used" in str(err)


def _overlap_cases():
    cases = {
        "add_": lambda a: a.expand(3, 3).add_(1),
        "mul_": lambda a: a.expand(3, 3).mul_(2),
        "iadd": lambda a: a.expand(3, 3).__iadd__(1),
        "copy_": lambda a: a.expand(3, 3).copy_(a.expand(3, 3) * 0 + 1),
        "clamp_": lambda a: a.expand(3, 3).clamp_(0.5, 1.0),
        "div_": lambda a: a.expand(3, 3).div_(2),
        "pow_": lambda a: a.expand(3, 3).pow_(2),
        "uniform_": lambda a: a.expand(3, 3).uniform_(),
        "normal_": lambda a: a.expand(3, 3).normal_(),
        "unsqueeze expand": lambda a: a.unsqueeze(0).expand(2, 3).sub_(1),
        # allowed: one value everywhere, or a view that repeats nothing
        "fill_": lambda a: a.expand(3, 3).fill_(4.0),
        "zero_": lambda a: a.expand(3, 3).zero_(),
        "row of an expansion": lambda a: a.unsqueeze(0).expand(2, 3)[0].add_(1),
        "setitem on a row": lambda a: a.expand(3, 3).__setitem__(0, 5.0),
        "setitem on a slice": lambda a: a.expand(3, 3).__setitem__((1, slice(0, 2)), 7.0),
    }
    return cases


OVERLAP = _overlap_cases()


@pytest.mark.parametrize("case", list(OVERLAP))
def test_in_place_on_an_expanded_tensor_as_in_torch(case):
    def run(m):
        a = m.tensor([0.25, 0.5, 0.75])
        if case in ("uniform_", "normal_"):
            OVERLAP[case](a)  # raises, as in torch (the values would differ anyway)
        else:
            OVERLAP[case](a)
        return a

    if case in ("uniform_", "normal_"):
        for m in (torch, plast):
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                run(m)
        return
    err = _same_as_torch(run)
    if err is not None:
        assert "more than one element of the written-to tensor refers to a single memory location" in str(err)


@pytest.mark.parametrize(
    "write",
    [
        lambda a: a.expand(3, 3).masked_fill_(plast.eye(3) > 0, 1.0),
        lambda a: a.expand(3, 3).index_put_((plast.tensor([0]),), plast.tensor(1.0)),
        lambda a: a.expand(3, 3).__setitem__(plast.tensor([0]), 1.0),
        lambda a: a.expand(3, 3).scatter_(1, plast.tensor([[0], [1], [2]]), 1.0),
        lambda a: a.expand(3, 3).__setitem__(slice(None), 2.0),
    ],
)
def test_masked_and_indexed_writes_into_an_expanded_tensor_raise(write):
    """torch only warns for masked_fill_ and index_put_ here (deprecated: "clone() the tensor") and writes the
    selected elements; plast computes the whole new value and copies it back row by row, so a later row's old
    values would overwrite an earlier row's writes: it refuses, as torch does for scatter_ and a full slice."""
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        write(plast.tensor([0.25, 0.5, 0.75]))


def test_copy_into_non_overlapping_views_still_writes_through(rng):
    src = rng.standard_normal((3, 4)).astype(np.float32)

    def run(m):
        a = m.zeros(4, 5)
        a[1:4, 0:4].copy_(m.tensor(src))
        a.t()[4].copy_(m.arange(4.0))  # a column, through a transpose
        a[0, ::2].copy_(m.tensor([9.0, 8.0, 7.0]))
        b = m.zeros(1, 3)
        b.expand(2, 3)[1].copy_(m.ones(3))  # a row of an expansion repeats nothing
        return m.cat([a.flatten(), b.flatten()])

    _same_as_torch(run)
