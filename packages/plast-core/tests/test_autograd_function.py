"""plast.autograd.Function against torch.autograd.Function (the same Functions written in both), under
create_graph, eager backward replays and @plast.jit; plast.compile."""

import numpy as np
import pytest
import torch

import plast
from plast.autograd import backward_replay
from plast.autograd.function import once_differentiable


def make(lib):
    """The same custom Functions, written against `lib` (torch or plast)."""
    F = lib.autograd.Function

    class Exp(F):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class Linear(F):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return x @ w.t() + b

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            gx = gw = gb = None
            if ctx.needs_input_grad[0]:
                gx = g @ w
            if ctx.needs_input_grad[1]:
                gw = g.t() @ x
            if ctx.needs_input_grad[2]:
                gb = g.sum(0)
            return gx, gw, gb

    class TwoOut(F):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y

        @staticmethod
        def backward(ctx, ga, gb):
            x, y = ctx.saved_tensors
            return ga * y + gb, ga * x + gb

    class MaxWithIndex(F):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax(1)
            onehot = (x == x.max(1, keepdim=True)[0]).to(x.dtype)
            ctx.save_for_backward(onehot)
            ctx.mark_non_differentiable(idx)
            return x.max(1)[0], idx

        @staticmethod
        def backward(ctx, g, g_idx):
            (onehot,) = ctx.saved_tensors
            return onehot * g.unsqueeze(1)

    class Scale(F):
        @staticmethod
        def forward(ctx, x, k, shift=0.0):
            ctx.k = k
            return x * k + shift

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, None

    class Cube(F):  # backward in differentiable ops: double backward works
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    class NewStyleMul(F):
        @staticmethod
        def forward(x, y):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x

    class NoneGrad(F):
        @staticmethod
        def forward(ctx, x, y):
            return x * 2 + y

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    class Unmaterialized(F):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            assert gb is None
            return ga * 2

    return dict(
        Exp=Exp, Linear=Linear, TwoOut=TwoOut, MaxWithIndex=MaxWithIndex, Scale=Scale, Cube=Cube,
        NewStyleMul=NewStyleMul, NoneGrad=NoneGrad, Unmaterialized=Unmaterialized,
    )  # fmt: skip


P, T = make(plast), make(torch)


def _pair(a, requires_grad=True):
    a = np.asarray(a, dtype=np.float32)
    return (
        plast.tensor(a, requires_grad=requires_grad),
        torch.tensor(a, requires_grad=requires_grad),
    )


def _close(p, t, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def _run(name, arrays, combine=lambda outs: outs, rg=None, **kw):
    """Apply Function `name` in both libraries, backward a weighted sum of its outputs; compare."""
    rg = rg or [True] * len(arrays)
    pairs = [_pair(a, r) for a, r in zip(arrays, rg)]
    results = []
    for fns, idx in ((P, 0), (T, 1)):
        args = [p[idx] for p in pairs]
        out = fns[name].apply(*args, **kw)
        outs = out if isinstance(out, tuple) else (out,)
        loss = None
        for i, o in enumerate(combine(outs)):
            term = (o * (i + 1.5)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        results.append((outs, [a.grad for a in args]))
    (po, pg), (to, tg) = results
    for a, b in zip(po, to):
        _close(a, b)
    for a, b in zip(pg, tg):
        assert (a is None) == (b is None)
        if a is not None:
            _close(a, b)
    return results


rng = np.random.default_rng(0)


def test_custom_exp():
    _run("Exp", [rng.standard_normal((3, 4))])


def test_custom_linear_with_saved_tensors_and_needs_input_grad():
    x, w, b = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    _run("Linear", [x, w, b])
    _run("Linear", [x, w, b], rg=[False, True, True])  # needs_input_grad[0] is False: gx stays None


def test_needs_input_grad_is_per_argument():
    seen = {}

    class Probe(plast.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            seen["needs"] = ctx.needs_input_grad
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            seen["bw"] = ctx.needs_input_grad
            return g, None, g

    Probe.apply(plast.ones(2, requires_grad=True), 2.0, plast.ones(2)).sum().backward()
    assert seen["bw"] == (True, False, False)


def test_two_outputs():
    _run("TwoOut", [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))])


def test_two_outputs_only_one_used_gets_zeros_for_the_other():
    _run("TwoOut", [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))], combine=lambda outs: outs[:1])


def test_non_differentiable_output():
    (po, _), (to, _) = _run("MaxWithIndex", [rng.standard_normal((4, 5))], combine=lambda outs: outs[:1])
    assert not po[1].requires_grad and not to[1].requires_grad
    assert po[0].requires_grad and to[0].requires_grad
    np.testing.assert_array_equal(po[1].numpy(), to[1].numpy())


def test_non_tensor_arguments_and_kwargs():
    _run("Scale", [rng.standard_normal((3,))], k=2.5)
    p = plast.ones(3, requires_grad=True)
    y = P["Scale"].apply(p, 3.0, shift=1.0)
    np.testing.assert_allclose(y.detach().numpy(), [4.0, 4.0, 4.0])


def test_new_style_setup_context():
    _run("NewStyleMul", [rng.standard_normal((2, 2)), rng.standard_normal((2, 2))])


def test_returning_none_gradients():
    _run("NoneGrad", [rng.standard_normal(3), rng.standard_normal(3)])


def test_set_materialize_grads_false_passes_none():
    _run("Unmaterialized", [rng.standard_normal(3)], combine=lambda outs: outs[:1])


def test_broadcasting_inputs_get_gradients_of_their_shape():
    _run("TwoOut", [rng.standard_normal((4, 1)), rng.standard_normal((1, 5))])


def test_non_contiguous_inputs():
    a = rng.standard_normal((4, 3)).astype(np.float32)
    px = plast.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    po = P["Exp"].apply(px.t())
    to = T["Exp"].apply(tx.t())
    _close(po, to)
    (po * 2).sum().backward()
    (to * 2).sum().backward()
    _close(px.grad, tx.grad)


def test_no_grad_needed_returns_the_forward_result():
    x = plast.ones(3)
    y = P["Exp"].apply(x)
    assert not y.requires_grad
    with plast.no_grad():
        y = P["Exp"].apply(plast.ones(3, requires_grad=True))
    assert not y.requires_grad


def test_ctx_attributes_and_saved_outputs_are_the_outputs():
    got = {}

    class F(plast.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.k = 3
            y = x * 2
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            got["same"] = y is out
            return g * ctx.k

    x = plast.ones(2, requires_grad=True)
    out = F.apply(x)
    out.sum().backward()
    assert got["same"]
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_double_backward():
    a = rng.standard_normal(5)
    for name in ("Cube", "Exp"):
        px, tx = _pair(a)
        pg = plast.autograd.grad(P[name].apply(px).sum(), px, create_graph=True)[0]
        tg = torch.autograd.grad(T[name].apply(tx).sum(), tx, create_graph=True)[0]
        _close(pg, tg)
        (pg * pg).sum().backward()
        (tg * tg).sum().backward()
        _close(px.grad, tx.grad)


def test_once_differentiable_backward_has_no_graph():
    class F(plast.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = plast.tensor([1.0, 2.0], requires_grad=True)
    (g,) = plast.autograd.grad(F.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert not g.requires_grad


# ---- errors, as torch raises them


def _errors(body):
    """body(lib) in both libraries; the exception types (and the messages' starts) agree."""
    caught = []
    for lib in (plast, torch):
        with pytest.raises(Exception) as e:
            body(lib)
        caught.append(e)
    assert type(caught[0].value) is type(caught[1].value), (caught[0].value, caught[1].value)
    assert str(caught[0].value)[:30] == str(caught[1].value)[:30], (caught[0].value, caught[1].value)


def test_wrong_number_of_gradients():
    def body(lib):
        class L(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * 2

        L.apply(lib.ones(2, 3, requires_grad=True), 2).sum().backward()

    _errors(body)


def test_extra_none_gradients_are_allowed():
    class F(plast.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = plast.ones(2, requires_grad=True)
    F.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_wrong_gradient_shape():
    def body(lib):
        class G(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g.sum(0)

        G.apply(lib.ones(2, 3, requires_grad=True)).sum().backward()

    _errors(body)


def test_gradient_for_a_non_tensor_argument():
    def body(lib):
        class H(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * 2, g

        H.apply(lib.ones(2, requires_grad=True), 3.0).sum().backward()

    _errors(body)


def test_missing_backward_and_forward():
    def no_backward(lib):
        class K(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        K.apply(lib.ones(2, requires_grad=True)).sum().backward()

    def no_forward(lib):
        class K(lib.autograd.Function):
            pass

        K.apply(lib.ones(2, requires_grad=True))

    _errors(no_backward)
    _errors(no_forward)


def test_calling_an_instance_is_refused_and_instantiating_warns():
    def body(lib):
        with pytest.warns(DeprecationWarning):
            f = P["Exp"]() if lib is plast else T["Exp"]()
        f(lib.ones(2))

    _errors(body)


def test_forward_called_directly_is_a_plain_static_method():
    for lib, fns in ((plast, P), (torch, T)):
        with pytest.raises(TypeError):
            fns["Exp"].forward(lib.ones(2))  # no ctx


def test_mark_dirty_is_not_supported():
    class F(plast.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(NotImplementedError, match="in-place"):
        F.apply(plast.ones(2, requires_grad=True))


def test_modified_saved_tensor_raises():
    """A saved argument written in place in its own memory after the call: both refuse at backward."""

    def body(lib, fns):
        x = lib.ones(3)
        w = lib.ones(3, requires_grad=True)
        out = fns["NewStyleMul"].apply(x, w)
        x.mul_(2)
        out.sum().backward()

    for lib, fns in ((plast, P), (torch, T)):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            body(lib, fns)


def test_saved_lazy_argument_rebound_in_place_keeps_its_old_value():
    """plast's in-place rule (graph/inplace.py): a tensor in a graph is rebound, the graph keeps the old value
    (torch raises instead)."""
    x = plast.ones(3, requires_grad=True)
    y = x * 1
    out = P["Cube"].apply(y)
    with plast.no_grad():
        y.mul_(2)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])


# ---- eager backward replays and @plast.jit


def _loop_step(fns, lib, w, b):
    def step(x):
        return (fns["Linear"].apply(x, w, b).tanh() ** 2).mean()

    return step


def test_backward_replay_falls_back_and_matches():
    a = rng.standard_normal((6, 3)).astype(np.float32)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)

    def grads(replay):
        w = plast.tensor(w0, requires_grad=True)
        b = plast.zeros(4, requires_grad=True)
        out = []
        for i in range(5):
            w.grad = b.grad = None
            loss = _loop_step(P, plast, w, b)(plast.tensor(a * (i + 1)))
            if replay:
                loss.backward()
            else:
                with backward_replay.disabled():
                    loss.backward()
            out.append((w.grad.numpy().copy(), b.grad.numpy().copy()))
        return out

    before = backward_replay.stats()
    replayed = grads(True)
    after = backward_replay.stats()
    assert after["replays"] == before["replays"]  # the Function's graph runs the ordinary way
    assert after["unreplayable"] > before["unreplayable"]
    for (gw, gb), (ew, eb) in zip(replayed, grads(False)):
        np.testing.assert_array_equal(gw, ew)
        np.testing.assert_array_equal(gb, eb)


def test_jit_step_with_a_function_replays_on_new_inputs():
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    xs = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(5)]

    def run(jit):
        w = plast.tensor(w0, requires_grad=True)
        b = plast.zeros(4, requires_grad=True)

        def step(x):
            w.grad = b.grad = None
            loss = (P["Scale"].apply(P["Linear"].apply(x, w, b), 0.5).tanh() ** 2).mean()
            loss.backward()
            with plast.no_grad():
                w.sub_(w.grad * 0.1)
                b.sub_(b.grad * 0.1)
            return loss

        f = plast.jit(step) if jit else step
        losses = [f(plast.tensor(x)).item() for x in xs]
        return losses, w.detach().numpy().copy(), f

    eager, we, _ = run(False)
    traced, wj, f = run(True)
    assert f.traces == 1 and f.replays == 4
    np.testing.assert_allclose(traced, eager, rtol=1e-6)
    np.testing.assert_allclose(wj, we, rtol=1e-6, atol=1e-7)


def test_training_loop_matches_torch():
    """A tiny model whose hidden layer is the custom Linear, 20 SGD steps from the same weights."""
    r = np.random.default_rng(1)
    x = r.standard_normal((16, 5)).astype(np.float32)
    y = r.standard_normal((16, 1)).astype(np.float32)
    w1, b1 = (r.standard_normal((8, 5)) * 0.4).astype(np.float32), np.zeros(8, np.float32)
    w2 = (r.standard_normal((1, 8)) * 0.4).astype(np.float32)

    def train(lib, fns):
        params = [lib.tensor(a.copy(), requires_grad=True) for a in (w1, b1, w2)]
        xt, yt = lib.tensor(x), lib.tensor(y)
        losses = []
        for _ in range(20):
            for p in params:
                p.grad = None
            h = fns["Linear"].apply(xt, params[0], params[1]).tanh()
            loss = ((h @ params[2].t() - yt) ** 2).mean()
            loss.backward()
            with lib.no_grad():
                for p in params:
                    p.sub_(p.grad * 0.1)
            losses.append(loss.item())
        return losses

    np.testing.assert_allclose(train(plast, P), train(torch, T), rtol=1e-5)


# ---- plast.compile


def test_compile_returns_what_it_was_given():
    def f(x):
        return x * 2

    assert plast.compile(f) is f
    assert plast.compile()(f) is f
    assert plast.compile(fullgraph=True, dynamic=False, backend="inductor", mode="max-autotune")(f) is f
    assert plast.compile(f, disable=True) is f

    @plast.compile
    def g(x):
        return x + 1

    @plast.compile(mode="reduce-overhead")
    def h(x):
        return x + 2

    np.testing.assert_allclose(g(plast.ones(2)).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(h(plast.ones(2)).numpy(), [3.0, 3.0])
    assert plast.compiler.disable(f) is f and plast.compiler.disable()(f) is f
    assert plast.compiler.is_dynamo_compiling() is False
    plast.compiler.reset()


def test_compile_checks_arguments_as_torch():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        plast.compile(lambda x: x, mode="default", options={})
    with pytest.raises(AssertionError, match="A callable function is expected"):
        plast.compile(3)
