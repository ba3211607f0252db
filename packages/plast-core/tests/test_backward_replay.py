"""Eager backward replayed from programs (autograd/backward_replay.py): a replayed backward must leave exactly what
the ordinary one leaves (the same gradients bit for bit, the same values, the same errors), and must step aside
wherever it could not."""

import numpy as np
import pytest

import plast
from plast.autograd import backward_replay
from plast.errors import StaleTensorError
from plast.graph import realize

pytestmark = pytest.mark.skipif(
    not realize._cache_enabled(), reason="replays are off with the plan cache (PLAST_PLAN_CACHE=0)"
)


def _params(rng, *shapes):
    return [plast.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]


def _run(make_loss, params, inputs, lr=0.05, zero=True):
    """Train steps: loss, backward, an SGD update in place. Returns each step's loss, gradients and the final
    parameters (numpy copies)."""
    out = []
    for x in inputs:
        if zero:
            for p in params:
                p.grad = None
        loss = make_loss(params, x)
        loss.backward()
        grads = [None if p.grad is None else p.grad.numpy().copy() for p in params]
        out.append((loss.item(), grads))
        with plast.no_grad():
            for p in params:
                if p.grad is not None:
                    p.sub_(p.grad * lr)
        plast.reset_transient_arenas()
    return out, [p.detach().numpy().copy() for p in params]


def _compare(make_loss, shapes, inputs_fn, steps=5, seed=0, replays=None, **kw):
    """The same training run with replays and without: identical results; with replays, `replays` of the steps
    replayed (default: all but the first two, which see the key and record its program)."""
    if replays is None:
        replays = steps - 2
    results = []
    for off in (False, True):
        rng = np.random.default_rng(seed)
        params = _params(rng, *shapes)
        inputs = inputs_fn(np.random.default_rng(seed + 1), steps)
        before = backward_replay.stats()["replays"]
        if off:
            with backward_replay.disabled():
                results.append(_run(make_loss, params, inputs, **kw))
            assert backward_replay.stats()["replays"] == before
        else:
            results.append(_run(make_loss, params, inputs, **kw))
            replayed = backward_replay.stats()["replays"] - before
            assert replayed == replays
    (steps_a, final_a), (steps_b, final_b) = results
    for (la, ga), (lb, gb) in zip(steps_a, steps_b):
        assert la == lb
        for a, b in zip(ga, gb):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)
    for a, b in zip(final_a, final_b):
        np.testing.assert_array_equal(a, b)
    return results[0]


def _fresh(shape):
    return lambda rng, n: [plast.tensor(rng.standard_normal(shape).astype(np.float32)) for _ in range(n)]


def test_mlp_steps_replay_with_new_inputs_each_step():
    def loss(p, x):
        w1, b1, w2, b2 = p
        h = plast.linear(x, w1, b1).relu()
        return ((plast.linear(h, w2, b2) - 1.0) ** 2).mean()

    _compare(loss, [(8, 3), (8,), (2, 8), (2,)], _fresh((5, 3)))


def test_broadcasting_reductions_and_unary_ops_replay():
    def loss(p, x):
        w, b = p
        y = (x * w + b).tanh()  # (4, 6) * (6,) + (4, 1)
        return (y.exp().sum(dim=1) * 0.5 + y.sigmoid().mean()).sum()

    _compare(loss, [(6,), (4, 1)], _fresh((4, 6)))


def test_inputs_that_are_views_at_other_offsets_each_step():
    """The key pins an input's strides, not where it starts: each step reads another window of one array, through
    a transpose."""
    base = np.random.default_rng(3).standard_normal((12, 5)).astype(np.float32)

    def inputs(rng, n):
        big = plast.tensor(base)
        return [big[i : i + 4, ::2].T for i in range(n)]  # (3, 4), strides (2, 5), offset 5i

    def loss(p, x):
        (w,) = p
        return ((w @ x).relu() ** 2).sum()

    _compare(loss, [(2, 3)], inputs)


def test_a_weight_used_twice_gets_both_gradients():
    def loss(p, x):
        (w,) = p
        return ((x @ w) @ w).sum() + (x @ w.T).mean()

    _compare(loss, [(4, 4)], _fresh((3, 4)))


def test_gradients_accumulate_into_existing_grads():
    def loss(p, x):
        w, b = p
        return ((x @ w + b) ** 2).mean()

    # keys: no .grad yet (step 1), then .grad present (seen at step 2, recorded at 3, replayed from step 4)
    _compare(loss, [(3, 2), (2,)], _fresh((4, 3)), steps=7, zero=False, replays=4)


def test_inputs_not_requiring_grad_and_integer_targets():
    def loss(p, x):
        (w,) = p
        target = plast.tensor([0, 2, 1, 0])
        return plast.cross_entropy(x @ w, target)

    _compare(loss, [(5, 3)], _fresh((4, 5)))


def test_held_intermediates_get_their_values():
    seen = []

    def loss(p, x):
        (w,) = p
        h = (x @ w).relu()
        out = (h * 3.0).sum()
        seen.append(h)
        return out

    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3, 2))
    xs = _fresh((4, 3))(rng, 4)
    before = backward_replay.stats()["replays"]
    for x in xs:
        w.grad = None
        loss([w], x).backward()
        h = seen.pop()
        assert h.is_realized
        np.testing.assert_allclose(
            h.detach().numpy(), np.maximum(x.numpy() @ w.detach().numpy(), 0), rtol=1e-6
        )
        plast.reset_transient_arenas()
    assert backward_replay.stats()["replays"] - before == 2


def test_each_step_gets_new_gradient_tensors():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    grads = []
    for k in range(4):
        w.grad = None
        ((w * float(k + 1)) ** 2).sum().backward()
        grads.append((w.grad, w.grad.numpy().copy()))
    for g, v in grads:  # a later step never writes an earlier step's .grad
        np.testing.assert_array_equal(g.numpy(), v)
    np.testing.assert_allclose(grads[3][1], 2 * 16 * w.detach().numpy(), rtol=1e-6)


def test_hooks_are_not_replayed_over():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    for _ in range(3):
        w.grad = None
        (w * 2.0).sum().backward()
    calls = []
    before = backward_replay.stats()["replays"]
    w.grad = None
    y = w * 2.0
    y.register_hook(lambda g: calls.append(1) or g * 10.0)
    y.sum().backward()
    assert calls == [1] and w.grad.tolist() == [20.0, 20.0, 20.0]
    assert backward_replay.stats()["replays"] == before


def test_in_place_change_of_a_saved_tensor_still_raises():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    x = plast.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        w.grad = None
        (w * x).sum().backward()
    loss = (w * x).sum()
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_a_freed_graph_raises_on_a_second_backward():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    for _ in range(3):
        loss = (w.exp() * 2.0).sum()
        loss.backward()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_a_stale_input_raises_as_it_does_without_replays():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    for _ in range(3):
        x = plast.tensor([1.0, 2.0, 3.0]) * 2.0
        plast.forward(x)  # computed: transient memory, an input of the graph below
        (w * x).sum().backward()
        plast.reset_transient_arenas()
    x = plast.tensor([1.0, 2.0, 3.0]) * 2.0
    plast.forward(x)
    loss = (w * x).sum()
    plast.reset_transient_arenas()
    with pytest.raises(StaleTensorError):
        loss.backward()


def test_values_computed_before_backward_make_a_graph_unreplayable():
    """A forward intermediate computed before backward lives in memory a replay could not rebind: that graph
    keeps the ordinary path, and is right."""

    def loss(p, x):
        (w,) = p
        h = x * w
        plast.forward(h)
        return (h * h).sum()

    before = backward_replay.stats()["unreplayable"]
    _compare(loss, [(3,)], _fresh((3,)), replays=0)
    assert backward_replay.stats()["unreplayable"] > before


def test_retain_graph_and_explicit_gradients_take_the_ordinary_path():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    before = backward_replay.stats()["replays"]
    for _ in range(3):
        w.grad = None
        y = (w * 3.0).sum()
        y.backward(retain_graph=True)
        y.backward()
        assert w.grad.tolist() == [6.0, 6.0, 6.0]
        w.grad = None
        (w * 3.0).backward(plast.tensor([1.0, 2.0, 3.0]))
        assert w.grad.tolist() == [3.0, 6.0, 9.0]
    assert backward_replay.stats()["replays"] == before


def test_anomaly_mode_turns_replays_off():
    rng = np.random.default_rng(0)
    (w,) = _params(rng, (3,))
    for _ in range(3):
        (w * 2.0).sum().backward()
    before = backward_replay.stats()["replays"]
    with plast.autograd.set_detect_anomaly(True):
        (w * 2.0).sum().backward()
    assert backward_replay.stats()["replays"] == before


def _many_ops(mask_index):
    idx = plast.tensor([2, 0, 1, 2])

    def loss(p, x):
        w, b, g = p
        h = x @ w  # (4, 3)
        h += b  # in place on an intermediate
        h.clamp_(min=0.0)
        h = h * 1.5
        h[0] = h[1] * 2.0  # a write through a view of an intermediate
        y = plast.cat([h, h[:, :1].exp()], dim=1)  # (4, 4)
        y = plast.layer_norm(y, (4,), weight=g)
        y = y.masked_fill(y > 1.0, 0.5)
        z = plast.softmax(y, dim=-1)[plast.arange(4), idx]  # integer indexing
        out = z.sum() + plast.gather(y, 1, idx.view(4, 1)).pow(2).mean()
        return out + y[y < 0].sum() if mask_index else out

    return loss


def test_in_place_ops_views_and_indexing_in_the_forward_replay():
    """In-place ops on intermediates (rebound in the graph), writes through views, gathers, cat, masked_fill,
    softmax, layer_norm and integer indexing: the replayed backward equals the ordinary one."""
    _compare(_many_ops(False), [(5, 3), (3,), (4,)], _fresh((4, 5)), steps=6)


def test_boolean_mask_indexing_computes_values_first_and_takes_the_ordinary_path():
    """y[y < 0] has a data-dependent shape: the forward computes y before backward, so no replay (and the same
    results)."""
    _compare(_many_ops(True), [(5, 3), (3,), (4,)], _fresh((4, 5)), steps=6, replays=0)


def test_recording_a_program_holds_no_intermediate_memory():
    # The backward that records a key's program frees its intermediate results as an ordinary backward does:
    # its transient peak is the ordinary one (holding every kernel's tensors until the program was built made
    # it the sum of all of them: 15% more on the bench's gpt).
    rng = np.random.default_rng(0)
    width, depth = 128, 4
    ws = _params(rng, *[(width, width)] * depth)
    ln = _params(rng, (width,), (width,))
    x = plast.tensor(rng.standard_normal((256, width)).astype(np.float32))
    y = plast.tensor(rng.integers(0, width, 256))

    def step():
        for p in ws + ln:
            p.grad = None
        h = x
        for w in ws:
            h = h + plast.gelu(plast.layer_norm(h, (width,), ln[0], ln[1]) @ w)
            h = h * plast.softmax(h, -1)
        plast.cross_entropy(h, y).backward()
        plast.reset_transient_arenas()

    peaks = []
    before = backward_replay.stats()
    for _ in range(3):  # ordinary, recorded, replayed
        step()
        peaks.append(plast.arena_stats()["cpu"]["transient"]["peak_in_use_bytes"])
    after = backward_replay.stats()
    assert after["programs"] == before["programs"] + 1 and after["replays"] == before["replays"] + 1
    assert peaks[1] == peaks[0]  # recording added nothing to the first (ordinary) step's peak
