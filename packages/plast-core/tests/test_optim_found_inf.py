"""GradScaler's found_inf on the fused optimizer updates: nonzero (or NaN) when the kernel runs, the whole update
is skipped (parameters, state, step counters, SGD's fresh flags, NAdam's mu_products); zero, it is the update
without found_inf. On the C path (contiguous and transposed parameters) and the numpy fallback (strided ones)."""

import numpy as np
import pytest

import plast

KINDS = ["sgd", "sgd_momentum", "adam", "adam_amsgrad", "rmsprop", "adadelta", "adagrad", "adamax", "nadam"]
STATE = {  # state buffers shaped like the parameter, and whether the update keeps a step counter
    "sgd": (0, False),
    "sgd_momentum": (1, False),
    "adam": (2, True),
    "adam_amsgrad": (3, True),
    "rmsprop": (3, True),  # square_avg, momentum buffer, grad_avg (centered)
    "adadelta": (2, True),
    "adagrad": (1, True),
    "adamax": (2, True),
    "nadam": (2, True),
}


def _contiguous(a):
    return plast.tensor(a)


def _transposed(a):
    """Dense but not row-major: the C path takes it."""
    return plast.tensor(np.ascontiguousarray(a.T)).T


def _strided(a):
    """Not dense (every other column of a wider tensor): the numpy fallback takes it."""
    wide = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
    wide[:, ::2] = a
    return plast.tensor(wide)[:, ::2]


def _f64(*vals):
    return plast.tensor(list(vals), dtype=plast.float64)


def _build(kind, layout, seed=0):
    """(call(found_inf=...), every tensor the update may write) with random parameters, gradients and positive
    state, laid out by `layout`."""
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5, 2)]
    params = [layout(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    grads = [layout(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    n_state, counted = STATE[kind]
    # positive state; RMSprop's grad_avg (its third buffer) small enough that square_avg - grad_avg^2 > 0
    scale = [0.1 if kind == "rmsprop" and j == 2 else 1.0 for j in range(n_state)]
    state = [[layout(rng.uniform(0.1, 1.0, s).astype(np.float32) * c) for s in shapes] for c in scale]
    steps = [plast.tensor(3.0, dtype=plast.float64) for _ in shapes] if counted else []
    extra = []

    def call(**kw):
        if kind == "sgd":
            plast.sgd_update_(params, grads, None, _f64(0.1, 0.0, 0.0, 0.01), **kw)
        elif kind == "sgd_momentum":
            plast.sgd_update_(
                params, grads, state[0], _f64(0.1, 0.9, 0.0, 0.0), fresh=extra, nesterov=True, **kw
            )
        elif kind in ("adam", "adam_amsgrad"):
            amsgrad = kind == "adam_amsgrad"
            plast.adam_update_(
                params,
                grads,
                state[0],
                state[1],
                steps,
                _f64(0.1, 0.9, 0.999, 1e-8, 0.01),
                amsgrad=amsgrad,
                decoupled_weight_decay=True,
                max_exp_avg_sqs=state[2] if amsgrad else None,
                **kw,
            )
        elif kind == "rmsprop":
            hyper = _f64(0.01, 0.99, 1e-8, 0.0, 0.9)
            plast.rmsprop_update_(
                params, grads, state[0], steps, hyper, momentum_buffers=state[1], grad_avgs=state[2], **kw
            )
        elif kind == "adadelta":
            plast.adadelta_update_(params, grads, state[0], state[1], steps, _f64(1.0, 0.9, 1e-6, 0.0), **kw)
        elif kind == "adagrad":
            plast.adagrad_update_(params, grads, state[0], steps, _f64(0.1, 0.0, 0.0, 1e-10), **kw)
        elif kind == "adamax":
            plast.adamax_update_(
                params, grads, state[0], state[1], steps, _f64(0.1, 0.9, 0.999, 1e-8, 0.0), **kw
            )
        else:
            hyper = _f64(0.1, 0.9, 0.999, 1e-8, 0.0, 4e-3)
            plast.nadam_update_(params, grads, state[0], state[1], steps, extra, hyper, **kw)

    if kind == "sgd_momentum":
        extra[:] = [
            plast.tensor(1.0, dtype=plast.float64),
            plast.zeros((), dtype=plast.float64),
        ]  # fresh flags
    elif kind == "nadam":
        extra[:] = [plast.tensor(0.5) for _ in shapes]  # mu_products
    return call, params + [t for s in state for t in s] + steps + extra


def _values(ts):
    return [t.numpy().copy() for t in ts]


@pytest.mark.parametrize("layout", [_contiguous, _transposed, _strided], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("flag", [1.0, float("inf"), float("nan")], ids=["one", "inf", "nan"])
def test_nonzero_found_inf_leaves_everything_untouched(kind, layout, flag):
    call, ts = _build(kind, layout)
    before = _values(ts)
    call(found_inf=plast.tensor([flag]))
    for b, t in zip(before, _values(ts)):
        np.testing.assert_array_equal(b, t)


@pytest.mark.parametrize("layout", [_contiguous, _transposed, _strided], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("kind", KINDS)
def test_zero_found_inf_updates_as_without_it(kind, layout):
    call_a, ts_a = _build(kind, layout)
    call_b, ts_b = _build(kind, layout)
    for _ in range(3):
        call_a()
        call_b(found_inf=plast.zeros(()))
    for a, b in zip(_values(ts_a), _values(ts_b)):
        np.testing.assert_array_equal(a, b)
    initial = _values(_build(kind, layout)[1])
    assert all(np.isfinite(a).all() for a in _values(ts_b))
    assert any(not np.array_equal(a, b) for a, b in zip(_values(ts_b), initial))  # it did update


@pytest.mark.parametrize("kind", ["sgd_momentum", "adam", "nadam"])
def test_found_inf_is_read_when_the_kernel_runs(kind):
    """One tensor, its value changed between calls: a jitted step's plan replays the update and decides per
    replay (the same trace skips on one call and updates on the next)."""
    call, ts = _build(kind, _contiguous)
    flag = plast.zeros(1)

    @plast.jit
    def step():
        call(found_inf=flag)

    seen = []
    for value in (0.0, 1.0, 0.0, float("nan"), 0.0):
        flag.copy_(plast.tensor([value]))
        before = _values(ts)
        step()
        seen.append(any(not np.array_equal(b, t) for b, t in zip(before, _values(ts))))
    assert seen == [True, False, True, False, True]
    assert step.traces == 1


def test_found_inf_must_be_one_float32_number():
    p, g = plast.ones(2), plast.ones(2)
    h = _f64(0.1, 0, 0, 0)
    with pytest.raises(ValueError, match="one-element float32"):
        plast.sgd_update_([p], [g], None, h, found_inf=plast.zeros(2))
    with pytest.raises(ValueError, match="one-element float32"):
        plast.sgd_update_([p], [g], None, h, found_inf=plast.zeros((), dtype=plast.float64))
    with pytest.raises(TypeError, match="found_inf must be a tensor"):
        plast.sgd_update_([p], [g], None, h, found_inf=0.0)
    assert p.tolist() == [1.0, 1.0]
