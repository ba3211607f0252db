"""Threads (issue 23). Grad mode is per thread, as in torch: one thread's no_grad leaves another's backward alone.
Two threads training their own models get each one's single-threaded losses exactly, and two threads running
forward and backward at once on shared parameters get the sequential gradients exactly."""

import sys
import threading

import numpy as np
import torch

import plast


def run_in_thread(fn):
    box = {}

    def target():
        try:
            box["out"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised in the test's thread)
            box["err"] = e

    th = threading.Thread(target=target)
    th.start()
    th.join(60)
    assert not th.is_alive()
    if "err" in box:
        raise box["err"]
    return box.get("out")


def test_new_thread_starts_with_grad_enabled():
    with plast.no_grad():
        assert not plast.is_grad_enabled()
        assert run_in_thread(plast.is_grad_enabled) is True
        assert run_in_thread(lambda: torch.is_grad_enabled()) is True
        assert not plast.is_grad_enabled()
    assert plast.is_grad_enabled()


def test_no_grad_in_one_thread_leaves_another_threads_backward_alone():
    a = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    entered, done = threading.Event(), threading.Event()

    def sleeper():
        with plast.no_grad():
            entered.set()
            done.wait(30)
            return plast.is_grad_enabled()

    th_box = {}
    th = threading.Thread(target=lambda: th_box.update(out=sleeper()))
    th.start()
    assert entered.wait(30)
    try:
        x = plast.tensor(a, requires_grad=True)
        loss = (x.tanh() * x).sum()
        assert loss.requires_grad
        loss.backward()
        xt = torch.tensor(a, requires_grad=True)
        (xt.tanh() * xt).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)

        # and the other way round: a worker thread's backward while the main thread sits in no_grad
        def worker():
            y = plast.tensor(a, requires_grad=True)
            (y * y).sum().backward()
            return y.grad.numpy()

        with plast.no_grad():
            g = run_in_thread(worker)
            assert not plast.is_grad_enabled()
        np.testing.assert_allclose(g, 2 * a, rtol=1e-6)
    finally:
        done.set()
        th.join(30)
    assert th_box["out"] is False  # the sleeper's own no_grad held throughout


def test_no_grad_decorator_called_from_two_threads():
    @plast.no_grad()
    def f(ev_in, ev_out):
        ev_in.set()
        ev_out.wait(30)
        return plast.is_grad_enabled()

    a_in, a_out = threading.Event(), threading.Event()
    box = {}
    th = threading.Thread(target=lambda: box.update(out=f(a_in, a_out)))
    th.start()
    assert a_in.wait(30)
    b_in, b_out = threading.Event(), threading.Event()
    b_out.set()
    assert f(b_in, b_out) is False
    assert plast.is_grad_enabled()
    a_out.set()
    th.join(30)
    assert box["out"] is False
    assert plast.is_grad_enabled()


def _train(seed, steps=30):
    # a linear least-squares model trained by hand-written SGD; big enough that kernels release the GIL
    rng = np.random.default_rng(seed)
    X = plast.tensor(rng.standard_normal((512, 256)).astype(np.float32))
    Y = plast.tensor(rng.standard_normal((512, 1)).astype(np.float32))
    w = plast.tensor(rng.standard_normal((256, 1)).astype(np.float32) * 0.1, requires_grad=True)
    b = plast.zeros(1, requires_grad=True)
    losses = []
    for _ in range(steps):
        loss = ((X @ w + b - Y) ** 2).mean()
        loss.backward()
        with plast.no_grad():
            w.sub_(w.grad * 0.01)
            b.sub_(b.grad * 0.01)
        w.grad = None
        b.grad = None
        losses.append(loss.item())
    return losses


def test_two_threads_training_their_own_models_match_sequential_runs():
    want = {s: _train(s) for s in (1, 2)}
    got = {}
    errors = []

    def target(s):
        try:
            got[s] = _train(s)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    for _ in range(3):
        got.clear()
        ths = [threading.Thread(target=target, args=(s,)) for s in (1, 2)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(120)
        assert not errors, errors
        for s in (1, 2):  # exactly: the engine lock makes each thread compute as it would alone
            assert got[s] == want[s], (s, got[s], want[s])


def _shared_step(params, X, Y):
    # a Linear-GELU-LayerNorm-Linear block on shared parameters: matmuls big enough to release the GIL, fused
    # elementwise chains and a reduction
    w1, b1, w2, b2 = params
    h = plast.layer_norm(plast.gelu(X @ w1 + b1), (w1.shape[1],))
    loss = (((h @ w2 + b2) - Y) ** 2).mean()
    loss.backward()
    return loss.item()


def test_two_threads_forward_and_backward_on_shared_parameters_get_the_sequential_gradients():
    # recording is not locked (only computing is: graph/realize.engine_lock): two threads that record ops
    # reading the same parameters and accumulate into their .grad at once must still get the sequential result.
    # Each round both threads run one step at once; the accumulated gradient is g1 + g2 in either order
    # (float addition is commutative), so it must equal the sequential one exactly. A tiny switch interval
    # makes the threads interleave inside recording, backward and the gradient write.
    rng = np.random.default_rng(0)
    params = [
        plast.tensor(rng.standard_normal(s).astype(np.float32) * 0.1, requires_grad=True)
        for s in ((64, 96), (96,), (96, 8), (8,))
    ]
    data = {
        s: (
            plast.tensor(np.random.default_rng(s).standard_normal((48, 64)).astype(np.float32)),
            plast.tensor(np.random.default_rng(s + 10).standard_normal((48, 8)).astype(np.float32)),
        )
        for s in (1, 2)
    }
    want_loss = {s: _shared_step(params, *data[s]) for s in (1, 2)}
    want_grads = [p.grad.numpy().copy() for p in params]
    errors = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(60):
            for p in params:
                p.grad = None
            got = {}
            barrier = threading.Barrier(2)

            def target(s, got=got, barrier=barrier):
                try:
                    barrier.wait(30)
                    got[s] = _shared_step(params, *data[s])
                except BaseException as e:  # noqa: BLE001 (reported below)
                    errors.append(e)

            ths = [threading.Thread(target=target, args=(s,)) for s in (1, 2)]
            for th in ths:
                th.start()
            for th in ths:
                th.join(60)
            assert not errors, errors
            assert got == want_loss, (got, want_loss)
            for p, want in zip(params, want_grads):
                np.testing.assert_array_equal(p.grad.numpy(), want)
    finally:
        sys.setswitchinterval(interval)
