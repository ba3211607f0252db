"""The one tape (graph/tape.py): a @plast.jit trace, a recorded eager backward pass and an eager optimizer step's
captured updates all record into a Tape installed in one slot; one recording runs at a time, and only a jit
trace counts as tracing (ops refuse to read values, memory is not planned)."""

import numpy as np
import pytest

import plast
from plast.autograd import backward_replay
from plast.compiler import UpdateReplay, capture_updates
from plast.errors import JitError
from plast.graph import realize, tape


def _hyper(lr):
    return plast.tensor([lr, 0.0, 0.0, 0.0], dtype=plast.float64)


def test_one_recording_at_a_time():
    with tape.recording(tape.Tape()):
        assert tape._tape is not None and not tape.tracing()
        with pytest.raises(
            RuntimeError, match="cannot record a recording while a recording is being recorded"
        ):
            with tape.recording(tape.Tape()):
                pass
    assert tape._tape is None


def test_only_a_jit_trace_is_tracing():
    seen = []

    @plast.jit
    def step(x):
        seen.append((type(tape._tape).__name__, plast.compiler.is_compiling()))
        return x * 2

    step(plast.ones(3))
    assert seen == [("Trace", True)]
    with capture_updates():
        assert isinstance(tape._tape, tape.UpdateCapture)
        assert not plast.compiler.is_compiling()


def test_update_capture_keeps_the_fused_updates_only():
    rng = np.random.default_rng(0)
    p = plast.tensor(rng.standard_normal(5).astype(np.float32))
    a = plast.tensor(rng.standard_normal(5).astype(np.float32))
    p0 = p.numpy().copy()
    with capture_updates() as calls:
        p.grad = a * 3.0 + 1.0  # lazy: its kernels run (and are handed to the tape) inside the capture
        plast.sgd_update_([p], [p.grad], None, _hyper(0.5))
        assert calls == []  # filled when the block ends
    assert [(s.kind, s.what, s.mutated) for s in calls] == [("mutation", "sgd_update", (1,))]
    np.testing.assert_allclose(p.numpy(), p0 - 0.5 * (a.numpy() * 3.0 + 1.0), rtol=1e-6, atol=1e-6)
    # the captured steps replay the update with a later step's gradient, as the ordinary call would
    p1 = p.numpy().copy()
    replay = UpdateReplay(calls, params=[p])
    p.grad = a
    assert replay.run()
    np.testing.assert_allclose(p.numpy(), p1 - 0.5 * a.numpy(), rtol=1e-6, atol=1e-6)


def test_a_jit_call_inside_another_recording_is_refused():
    @plast.jit
    def step(x):
        return x + 1

    with capture_updates():
        with pytest.raises(JitError, match="an optimizer's updates is recorded"):
            step(plast.ones(2))


@pytest.mark.skipif(
    not realize._cache_enabled(), reason="replays are off with the plan cache (PLAST_PLAN_CACHE=0)"
)
def test_a_backward_pass_records_on_the_one_tape_and_is_not_tracing(monkeypatch):
    seen = []
    run = backward_replay.backward_leaves

    def watched(*args):
        seen.append((tape._tape.what, tape.tracing()))
        return run(*args)

    monkeypatch.setattr(backward_replay, "backward_leaves", watched)
    rng = np.random.default_rng(1)
    w = plast.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    grads = []
    for _ in range(3):
        x = plast.tensor(rng.standard_normal((2, 4)).astype(np.float32))
        w.grad = None
        (x @ w).tanh().sum().backward()
        grads.append((x.numpy(), w.grad.numpy().copy()))
    # the second call with this graph's key records its program (the first only sees the key)
    assert seen == [("a backward pass", False)]
    for xv, gw in grads:  # each step's gradient is the ordinary one: d/dw sum(tanh(x @ w))
        t = np.tanh(xv @ w.detach().numpy())
        np.testing.assert_allclose(gw, xv.T @ (1 - t * t), rtol=1e-5, atol=1e-6)


def test_trace_listeners_hear_a_jit_trace_start_and_end(monkeypatch):
    heard = []
    monkeypatch.setattr(tape, "_trace_listeners", [])
    plast.compiler.on_trace(heard.append)

    @plast.jit
    def step(x):
        heard.append(("inside", plast.compiler.is_compiling()))
        return x + 1

    step(plast.ones(2))
    step(plast.ones(2))  # a replay traces nothing
    assert heard == [True, ("inside", True), False]
    with capture_updates():  # an optimizer's capture is not a trace
        pass
    assert heard == [True, ("inside", True), False]

    @plast.jit
    def fails(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fails(plast.ones(2))
    assert heard[-2:] == [True, False]  # told the trace ended, also when it failed
