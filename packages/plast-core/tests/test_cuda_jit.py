"""@plast.jit on CUDA: device-correct tape steps, step-by-step replays, and replays as one CUDA graph.

Without a GPU (everywhere): a fake driver whose "device memory" is host memory, bounds-checked on every access,
with a stream that records what is launched on it while it captures (and a graph that runs the records again).
The op table's "cuda" column is replaced by host stand-ins: each launches one fake kernel that runs the op's CPU
kernel on host views of the fake device memory, with the addresses it was launched with, as a real kernel's
parameters hold them. So a graph replays exactly what was captured: a step that read a tensor's old address, or
a copy that ran at capture time instead of in the graph, gives wrong values here. The Philox kernels (plain and
``*_devstate``) and the strided copy kernel have host twins too.

On a GPU (``@pytest.mark.cuda``): xor training under jit matches the CPU's losses, and every replay is one graph
launch.
"""

import ctypes
import os
import struct
import subprocess
import sys

import fake_cuda
import numpy as np
import pytest

import plast
import plast._core.cuda_driver as cuda_backend
from plast.graph import tape
from plast.kernels.cpu import _kernels as cpu_kernels_c
from plast.kernels.cpu import kernels as cpu_kernels
from plast.kernels.cuda import graphs, kernels, kernels_nn, loader
from plast.kernels.cuda.abi import Params
from plast.memory import arenas as _arenas
from plast.memory import cuda as memory_cuda
from plast.memory.arena import borrow
from plast.ops.registry import OPS

needs_gpu = pytest.mark.skipif(
    not cuda_backend.is_available(), reason=f"CUDA backend not available: {cuda_backend.unavailable_reason()}"
)


# ---- the fake driver -----------------------------------------------------------------------------------------


class FakeGraphExec:
    def __init__(self, driver, ops):
        self.driver, self.ops = driver, ops

    def launch(self, stream=None):
        self.driver.calls.append(("graph_launch", len(self.ops)))
        for op in self.ops:
            op()


class FakeGraph:
    def __init__(self, driver, ops):
        self.driver, self.ops = driver, ops

    def instantiate(self):
        self.driver.calls.append(("instantiate", len(self.ops)))
        return FakeGraphExec(self.driver, list(self.ops))


class FakeStream:
    driver = None  # set on the per-driver subclass (FakeDriver.Stream)

    def __init__(self, flags=0):
        self.flags = flags
        self.recording = None  # a list of ops while capturing
        self.handle = id(self)
        self.driver.streams.append(self)

    def begin_capture(self, capture_mode=0):
        assert self.recording is None, "capture begun twice"
        assert capture_mode == FakeDriver.capture_mode.RELAXED
        self.recording = []
        self.driver.calls.append(("begin_capture",))

    def end_capture(self):
        ops, self.recording = self.recording, None
        self.driver.calls.append(("end_capture", len(ops)))
        return FakeGraph(self.driver, ops)


class FakeFunction:
    """A kernel: `run(params)` computes on the host; launched on a capturing stream it is recorded instead."""

    def __init__(self, driver, name, run):
        self.driver, self.name, self.run = driver, name, run

    def _launch_kernel(self, grid, block, params, shared, stream):
        self.driver.calls.append(("launch", self.name))
        if stream is not None and stream.recording is not None:
            stream.recording.append(lambda: self.run(params))
        else:
            self.driver.no_capture(f"a kernel launch on the legacy stream ({self.name})")
            self.run(params)


class FakeModule:
    def __init__(self, driver, kernels_):
        self.driver, self.kernels = driver, kernels_

    def get_function(self, name):
        if name not in self.kernels:
            raise KeyError(f"the fake GPU has no host twin of kernel {name!r}")
        return FakeFunction(self.driver, name, self.kernels[name])


class FakeDriver(fake_cuda.FakeDriver):
    """fake_cuda's fake driver with stream capture and graphs, as a PyCUDA that binds them has them. A
    synchronous (legacy-stream) call while a stream captures fails the test: on a GPU it would invalidate the
    capture."""

    class capture_mode:
        GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2

    def __init__(self):
        super().__init__()
        self.streams = []
        self.modules = {"random": _philox_twins(self), "elementwise": _copy_twins(self)}
        self.Stream = type("Stream", (FakeStream,), {"driver": self})  # a class, as pycuda.driver.Stream

    def no_capture(self, what):
        assert not any(s.recording is not None for s in self.streams), f"{what} while a stream captures"

    sync = no_capture

    def _async(self, stream, name, op):
        assert stream is not None, f"{name} without a stream"
        self.calls.append((name,))
        if stream.recording is not None:
            stream.recording.append(op)
        else:
            op()

    def memcpy_dtod_async(self, dest, src, nbytes, stream=None):
        self._async(
            stream,
            "dtod_async",
            lambda: ctypes.memmove(self.check(dest, nbytes), self.check(src, nbytes), nbytes),
        )

    def memset_d8_async(self, dest, value, nbytes, stream=None):
        self._async(stream, "memset_async", lambda: ctypes.memset(self.check(dest, nbytes), value, nbytes))

    def module_from_buffer(self, binary):
        raise AssertionError("modules come from loader._modules on the fake")

    def host(self, address, nbytes):
        """A writable byte view of fake device memory."""
        return np.frombuffer((ctypes.c_char * nbytes).from_address(self.check(address, nbytes)), np.uint8)


def _philox_twins(drv):
    """Host twins of kernels/random.cu: the CPU generator writing at the (host) device address."""
    out = {}
    for kind, code, suf in (
        ("uniform", 3, "f32"),
        ("uniform", 4, "f64"),
        ("normal", 3, "f32"),
        ("normal", 4, "f64"),
        ("u32", 3, None),
    ):
        name = "philox_u32" if kind == "u32" else f"philox_{kind}_{suf}"
        sc = "d" if code == 4 else "f"

        def plain(params, kind=kind, code=code, sc=sc):
            seed, off, address, n = struct.unpack_from("<QQQq", params)
            p1, p2 = struct.unpack_from(f"<2{sc}", params, 32) if kind != "u32" else (0.0, 0.0)
            cpu_kernels_c.philox_fill(kind, code, seed, off, drv.check(address, 1), n, p1, p2)

        def devstate(params, kind=kind, code=code, sc=sc):
            state, address, n = struct.unpack_from("<QQq", params)
            seed, off = drv.host(state, 16).view(np.uint64).tolist()  # read when the kernel runs
            p1, p2 = struct.unpack_from(f"<2{sc}", params, 24) if kind != "u32" else (0.0, 0.0)
            cpu_kernels_c.philox_fill(kind, code, seed, off, drv.check(address, 1), n, p1, p2)

        out[name], out[name + "_devstate"] = plain, devstate
    return out


_NP = {"u8": np.bool_, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}


def _strided(drv, address, lay, npdt):
    ndim = struct.unpack_from("<i", lay)[0]
    shape = struct.unpack_from("<8q", lay, 8)[:ndim]
    strides = struct.unpack_from("<8q", lay, 72)[:ndim]
    isz = np.dtype(npdt).itemsize
    lo = sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
    hi = sum((s - 1) * st for s, st in zip(shape, strides) if st > 0) + 1
    raw = drv.host(address + lo * isz, (hi - lo) * isz).view(npdt)
    return np.lib.stride_tricks.as_strided(raw[-lo:], shape, tuple(st * isz for st in strides))


def _copy_twins(drv):
    """Host twins of elementwise.cu's strided copies (copy_<src>_<dst>: src, layout, dst, layout, n) and fills
    (fill_b<bytes>: dst, layout, n, bit pattern)."""
    out = {}
    for a in _NP:
        for b in _NP:

            def run(params, a=a, b=b):
                src = struct.unpack_from("<Q", params, 0)[0]
                lx = params[8 : 8 + 136]
                dst = struct.unpack_from("<Q", params, 144)[0]
                lo = params[152 : 152 + 136]
                _strided(drv, dst, lo, _NP[b])[...] = _strided(drv, src, lx, _NP[a]).astype(_NP[b])

            out[f"copy_{a}_{b}"] = run
    for item, u in ((1, np.uint8), (4, np.uint32), (8, np.uint64)):

        def fill(params, u=u, item=item):
            dst = struct.unpack_from("<Q", params, 0)[0]
            lo = params[8 : 8 + 136]
            (bits,) = np.frombuffer(params, u, 1, 152)
            _strided(drv, dst, lo, u)[...] = bits

        out[f"fill_b{item}"] = fill
    return out


# ---- host stand-ins for the op table's CUDA column -------------------------------------------------------------


def _host_view(t):
    """A CPU tensor over t's fake device memory, at the address t has now."""
    from plast import Tensor

    st = t._storage
    return Tensor._from_storage(
        borrow(None, st.address, st.nbytes),
        tuple(t._shape),
        t.dtype,
        plast.device("cpu"),
        t._strides,
        t._offset,
    )


def _standin(drv, op):
    cpu = op.kernels["cpu"]

    def kernel(node, inputs, outputs):
        ins, outs = [_host_view(t) for t in inputs], [_host_view(t) for t in outputs]
        # the "kernel" is bound to the addresses of this launch, as a real kernel's parameters are
        loader.launch(FakeFunction(drv, op.name, lambda params: cpu(node, ins, outs)), (1,), (1,), Params())

    kernel.__name__ = f"fake_cuda_{op.name}"
    return kernel


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake GPU running every CUDA op through its CPU kernel; op table, arenas and caches restored after."""
    factory = sys.modules["plast.ops.factory"]  # the shared 0-d constants
    drv = FakeDriver()
    info = {"name": "fake", "compute_capability": (9, 0), "devices": 1, "memory_bytes": 1 << 30}
    monkeypatch.setattr(cuda_backend, "_probe", (True, "", info))
    monkeypatch.setattr(cuda_backend, "_ctx", (drv, None, "sm_90"))
    monkeypatch.setattr(
        loader, "_modules", {name: loader.Module(name, FakeModule(drv, k)) for name, k in drv.modules.items()}
    )
    monkeypatch.setattr(memory_cuda, "capture_stream", None)
    monkeypatch.setattr(graphs, "_api", None)
    monkeypatch.setattr(graphs, "_stream", None)
    monkeypatch.setattr(graphs, "_capture", None)
    monkeypatch.setattr(graphs, "_binding", None)
    monkeypatch.setattr(kernels, "_err_state", {})
    monkeypatch.setattr(kernels_nn, "_tables", {})
    monkeypatch.setenv("PLAST_FUSION", "0")  # fused groups have CUDA kernels of their own, with no host twin
    monkeypatch.delenv("PLAST_CUDA_GRAPHS", raising=False)
    columns = {name: op.kernels.get("cuda") for name, op in OPS.items()}
    saved = _arenas._arenas.pop("cuda", None)
    plast.zeros(1, device="cuda")  # the CUDA arenas, and the real CUDA column, which is replaced now
    for op in OPS.values():
        if "cpu" in op.kernels and not op.view and op.name != "to_device":
            op.kernels["cuda"] = _standin(drv, op)
    yield drv
    _arenas._arenas.pop("cuda", None)
    if saved is not None:
        _arenas._arenas["cuda"] = saved
    for name, k in columns.items():
        if k is None:
            OPS[name].kernels.pop("cuda", None)
        else:
            OPS[name].kernels["cuda"] = k
    for key in [k for k, t in factory.SCALAR_CACHE.items() if t.device.type == "cuda"]:
        del factory.SCALAR_CACHE[key]


def _launches(drv):
    return sum(1 for c in drv.calls if c[0] == "graph_launch")


# ---- the workload ------------------------------------------------------------------------------------------------


def _params(device, seed=0):
    plast.manual_seed(seed)
    w1 = (plast.randn(3, 8) * 0.5).to(device).requires_grad_()
    b1 = plast.zeros(8, device=device).requires_grad_()
    w2 = (plast.randn(8, 2) * 0.5).to(device).requires_grad_()
    return [w1, b1, w2]


def _train_step(params, lr=0.1, p_drop=0.0):
    w1, b1, w2 = params

    def step(x, y):
        h = (x @ w1 + b1).tanh()
        if p_drop:
            h = plast.dropout(h, p_drop)
        out = h @ w2
        loss = ((out - y) * (out - y) * plast.tensor([1.0, 0.5], device=x.device)).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with plast.no_grad():
            for p in params:
                p.sub_(p.grad * lr)
            w1.T[1:3, ::2].mul_(0.999)  # an in-place write into a strided view: a strided copy on replay
        return loss, out

    return step


def _data(rng, device, n=5):
    return [
        (
            plast.tensor(rng.standard_normal((6, 3)).astype(np.float32), device=device),
            plast.tensor(rng.standard_normal((6, 2)).astype(np.float32), device=device),
        )
        for _ in range(n)
    ]


def _run(step_fn, data, calls=5):
    out = []
    for i in range(calls):
        x, y = data[i % len(data)]
        loss, pred = step_fn(x, y)
        out.append((loss.detach().numpy().copy(), pred.detach().numpy().copy()))
        plast.reset_transient_arenas()
    return out


# ---- the tape ------------------------------------------------------------------------------------------------


def test_tape_records_device_steps(fake_gpu, rng):
    """Every step of a CUDA trace replays with a CUDA kernel: copies (in-place writes, persisted results),
    random fills, optimizer-style in-place updates; the planned intermediates live in one GPU block."""
    from plast.memory.cuda import DeviceStorage

    params = _params("cuda")
    step = plast.jit(_train_step(params, p_drop=0.25))
    x, y = _data(rng, "cuda", 1)[0]
    step(x, y)
    (plan,) = step.plans.values()
    kinds = {s.kind for s in plan.steps}
    assert kinds == {"kernel", "copy", "random"}, kinds
    for s in plan.steps:
        assert all(t.device.type == "cuda" for t in s.inputs + s.outputs), s
        assert s.kernel is not cpu_kernels.copy, f"{s.what} records the CPU copy kernel"
        if s.kind == "copy":
            assert s.kernel is tape.device_copy
        if s.kind == "kernel":
            assert s.kernel is s.node.op.kernels["cuda"]
    whats = [s.what for s in plan.steps]
    assert "persist" in whats and "sub_" in whats and "mul_" in whats and "random_uniform" in whats
    blocks = plan.block if isinstance(plan.block, tuple) else (plan.block,)
    assert blocks and all(isinstance(b, DeviceStorage) for b in blocks)


def test_optimizer_updates_replay_on_the_device(fake_gpu, rng):
    """A fused update recorded while tracing replays with its CUDA kernel, on a captured parameter and on one
    passed as an argument (the graph writes the argument's buffer back)."""
    a0, b0, g0 = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    p_cap = plast.tensor(a0, device="cuda")
    p_arg = plast.tensor(b0, device="cuda")
    hyper = plast.tensor([0.1, 0.0, 0.0, 0.0], dtype=plast.float64, device="cuda")

    @plast.jit
    def f(p, g):
        plast.sgd_update_([p_cap, p], [g, g * 2], None, hyper)
        return p.sum()

    g = plast.tensor(g0, device="cuda")
    for k in range(1, 5):
        f(p_arg, g)
        np.testing.assert_allclose(p_cap.numpy(), a0 - k * np.float32(0.1) * g0, rtol=1e-5)
        np.testing.assert_allclose(p_arg.numpy(), b0 - k * np.float32(0.2) * g0, rtol=1e-5)
    (plan,) = f.plans.values()
    (mut,) = [s for s in plan.steps if s.kind == "mutation"]
    assert mut.kernel is OPS["sgd_update"].kernels["cuda"]
    assert plan.graph and plan.graph.graph.launches == 3


# ---- step by step and as a graph -------------------------------------------------------------------------------


@pytest.mark.parametrize("graphs_on", [True, False], ids=["graph", "steps"])
def test_training_replays_match_eager(fake_gpu, rng, monkeypatch, graphs_on):
    """Jitted training on the (fake) GPU equals eager training on it, call for call, with new argument memory
    every call; as a graph every replay is one launch after the arguments are copied in."""
    if not graphs_on:
        monkeypatch.setenv("PLAST_CUDA_GRAPHS", "0")
    data = _data(rng, "cuda")
    p_eager = _params("cuda")
    plast.manual_seed(5)
    eager = _run(_train_step(p_eager, p_drop=0.25), data, 7)
    rng_after_eager = plast.get_rng_state().tolist()
    p_jit = _params("cuda")
    step = plast.jit(_train_step(p_jit, p_drop=0.25))
    plast.manual_seed(5)
    before = graphs.stats()
    got = _run(step, data, 7)
    assert step.traces == 1 and step.replays == 6
    for (la, pa), (lb, pb) in zip(eager, got):
        np.testing.assert_array_equal(lb, la)
        np.testing.assert_array_equal(pb, pa)
    for a, b in zip(p_eager, p_jit):
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
    assert plast.get_rng_state().tolist() == rng_after_eager  # the generator moved as in eager mode
    (plan,) = step.plans.values()
    after = graphs.stats()
    if graphs_on:
        assert plan.graph and plan.graph.graph.launches == step.replays
        assert after["launches"] - before["launches"] == step.replays == _launches(fake_gpu)
        assert after["captures"] - before["captures"] == 1
    else:
        assert plan.graph is False and _launches(fake_gpu) == 0


def test_graph_replay_copies_arguments_and_launches_once(fake_gpu, rng):
    w = plast.tensor(rng.standard_normal((5, 3)).astype(np.float32), device="cuda")

    @plast.jit
    def f(x):
        return (x @ w).relu().sum(0) * 2

    def arg():
        # a view into a larger block: the argument's span is copied, not its whole storage
        big = plast.tensor(rng.standard_normal((10, 5)).astype(np.float32), device="cuda")
        return big[3:7]

    f(arg())  # trace
    f(arg())  # capture, then the first launch
    assert ("begin_capture",) in fake_gpu.calls
    for _ in range(3):
        x = arg()
        fake_gpu.calls.clear()
        got = f(x)
        launch_at = [i for i, c in enumerate(fake_gpu.calls) if c[0] == "graph_launch"]
        assert len(launch_at) == 1
        assert ("dtod", 4 * 5 * 4) in fake_gpu.calls[: launch_at[0]]  # the argument, into the plan's buffer
        assert not [c for c in fake_gpu.calls if c[0] in ("launch", "begin_capture")], "ran outside the graph"
        want = np.maximum(x.numpy() @ w.numpy(), 0).sum(0) * 2
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert f.replays == 4 and f.plans[next(iter(f.plans))].graph.graph.launches == 4


def test_graph_writes_arguments_back(fake_gpu):
    """A plan that writes its argument in place writes the caller's tensor (the buffer is copied back)."""

    @plast.jit
    def bump(x):
        with plast.no_grad():
            x.add_(1.0)
        return x.sum()

    a = plast.zeros(3, device="cuda")
    assert bump(a).item() == 3.0
    b = plast.full((3,), 10.0, device="cuda")
    c = plast.full((3,), 20.0, device="cuda")
    assert bump(b).item() == 33.0 and bump(c).item() == 63.0 and bump(b).item() == 36.0
    assert a.tolist() == [1.0] * 3 and b.tolist() == [12.0] * 3 and c.tolist() == [21.0] * 3
    (plan,) = bump.plans.values()
    assert plan.graph and plan.graph.graph.launches == 3


def test_random_fills_advance_per_replay(fake_gpu):
    """As on the CPU: each call draws fresh numbers from the generator's offset at that time, and the graph
    draws the numbers eager calls would (one slot write, no extra launches)."""

    @plast.jit
    def f(x):
        return x + plast.rand(5, device="cuda") + plast.randn(2, 5, device="cuda", dtype=plast.float64)

    x = plast.zeros(5, device="cuda", dtype=plast.float64)
    plast.manual_seed(3)
    got = [f(x).numpy() for _ in range(4)]
    plast.manual_seed(3)
    want = [
        (plast.rand(5).to(plast.float64) + plast.randn(2, 5, dtype=plast.float64)).numpy() for _ in range(4)
    ]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[1], got[2])
    (plan,) = f.plans.values()
    assert plan.graph and plan.graph.graph.rng_used == 2 and plan.graph.graph.launches == 3


def test_random_fill_with_its_own_generator(fake_gpu):
    g = plast.Generator().manual_seed(9)

    @plast.jit
    def f(x):
        return x * plast.rand(4, generator=g, device="cuda")

    x = plast.ones(4, device="cuda")
    got = [f(x).numpy() for _ in range(3)]
    g2 = plast.Generator().manual_seed(9)
    for a in got:
        np.testing.assert_array_equal(a, plast.rand(4, generator=g2).numpy())
    assert g._offset == g2._offset


def test_host_copy_in_a_step_falls_back_to_steps(fake_gpu, monkeypatch):
    """A launcher that reads device memory back can't be in a graph: the capture fails (its draws undone) and
    the plan replays step by step, correctly; after two tries it stops trying."""
    from plast.memory import cuda as memory

    op = OPS["exp"]
    real = op.kernels["cuda"]

    def reading(node, inputs, outputs):
        memory.to_host(inputs[0]._storage, (1,), np.float32)
        real(node, inputs, outputs)

    op.kernels["cuda"] = reading

    @plast.jit
    def f(x):
        return (x + plast.rand(3, device="cuda")).exp()

    x = plast.ones(3, device="cuda")
    plast.manual_seed(1)
    got = [f(x).numpy() for _ in range(4)]
    plast.manual_seed(1)
    want = [(1 + plast.rand(3)).exp().numpy() for _ in range(4)]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    (plan,) = f.plans.values()
    assert plan.graph is False and _launches(fake_gpu) == 0
    assert sum(1 for c in fake_gpu.calls if c[0] == "begin_capture") == graphs.MAX_CAPTURE_TRIES


def test_error_flags_are_read_after_each_launch(fake_gpu):
    """A checking kernel in a graph flags a bad index on a later call: the launch raises what eager raises."""
    op = OPS["embedding"]

    def embedding(node, inputs, outputs):
        ids, w, out = _host_view(inputs[0]), _host_view(inputs[1]), _host_view(outputs[0])
        V = inputs[1].shape[0]
        with kernels.checked(
            lambda code, value, bound, pos: IndexError(f"embedding: id {value} of {bound}")
        ) as err:

            def run(params):
                idx = cpu_kernels.np_view(ids)
                bad = (idx < 0) | (idx >= V)
                if bad.any():
                    flag = fake_gpu.host(err, 32).view(np.int64)
                    flag[:] = (1, idx[bad][0], V, int(np.argmax(bad.ravel())))
                    return
                cpu_kernels.np_view(out)[...] = cpu_kernels.np_view(w)[idx]

            loader.launch(FakeFunction(fake_gpu, "embedding", run), (1,), (1,), Params().ptr(err))

    op.kernels["cuda"] = embedding
    table = plast.tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device="cuda")

    @plast.jit
    def f(ids):
        return plast.embedding(ids, table) * 2

    ok = plast.tensor([0, 3, 1], device="cuda")
    assert f(ok).tolist() == [[0, 2, 4], [18, 20, 22], [6, 8, 10]]
    assert f(plast.tensor([2, 2, 0], device="cuda")).tolist() == [[12, 14, 16]] * 2 + [[0, 2, 4]]
    with pytest.raises(IndexError, match="embedding: id 7 of 4"):
        f(plast.tensor([1, 7, 0], device="cuda"))
    assert f(ok).tolist()[1] == [18, 20, 22]  # the flag is zeroed again inside the graph
    (plan,) = f.plans.values()
    assert plan.graph and len(plan.graph.graph.flags) == 1


def test_mixed_cpu_and_cuda_plans_replay_step_by_step(fake_gpu, rng):
    a = rng.standard_normal(4).astype(np.float32)

    @plast.jit
    def f(x):
        return (x * 2).cpu() + 1

    x = plast.tensor(a, device="cuda")
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), a * 2 + 1)
    (plan,) = f.plans.values()
    assert plan.graph is False and _launches(fake_gpu) == 0 and f.replays == 2


def test_env_switch_turns_graphs_off(fake_gpu, monkeypatch):
    monkeypatch.setenv("PLAST_CUDA_GRAPHS", "0")

    @plast.jit
    def f(x):
        return x * 3

    x = plast.ones(2, device="cuda")
    assert [f(x).tolist() for _ in range(3)] == [[3.0, 3.0]] * 3
    assert f.plans[next(iter(f.plans))].graph is False
    assert not [c for c in fake_gpu.calls if c[0] in ("begin_capture", "graph_launch")]


def test_cpu_plans_are_untouched(fake_gpu):
    @plast.jit
    def f(x):
        return x * 3

    x = plast.ones(2)
    assert [f(x).tolist() for _ in range(3)] == [[3.0, 3.0]] * 3
    assert f.plans[next(iter(f.plans))].graph is False


def test_capture_records_device_memory_ops_and_holds_memory(fake_gpu):
    """Inside a capture, memsets and device copies are recorded (a replay zeroes an accumulator again), kernel
    scratch and uploaded tables belong to the graph, and host copies fail the capture."""
    from plast.memory import cuda as memory

    acc = plast.full((4,), 5.0, device="cuda")
    src = plast.full((4,), 2.0, device="cuda")
    out = plast.zeros(4, device="cuda")
    table = kernels_nn._device_bytes(b"\1" * 48)  # uploaded before the capture: a cache hit inside it
    held = {}

    def run():
        kernels.fill_zero(acc)
        memory.copy_device(kernels.addr(out), kernels.addr(src), 16)
        held["scratch"] = kernels.scratch(100)
        held["table"] = kernels_nn._device_bytes(b"\1" * 48)

    g = graphs.capture(run)
    assert graphs.active() is None and memory_cuda.capture_stream is None
    assert acc.tolist() == [5.0] * 4 and out.tolist() == [0.0] * 4  # recorded, not run
    g.launch()
    assert acc.tolist() == [0.0] * 4 and out.tolist() == [2.0] * 4
    with plast.no_grad():
        acc.fill_(7.0)
    g.launch()
    assert acc.tolist() == [0.0] * 4
    assert held["table"] is table and any(x is table for x in g.keep)
    assert any(x is held["scratch"] for x in g.keep) and not held["scratch"].arena.transient
    with pytest.raises(graphs.NotCapturable, match="host-to-device"):
        graphs.capture(lambda: kernels_nn._device_bytes(b"\2" * 48))
    with pytest.raises(graphs.NotCapturable, match="device-to-host"):
        graphs.capture(lambda: acc.numpy())
    assert graphs.active() is None and memory_cuda.capture_stream is None
    assert not [s for s in fake_gpu.streams if s.recording is not None]


# ---- the driver API by ctypes ------------------------------------------------------------------------------------


class FakeLib:
    """The driver library's graph functions, recording calls and writing handles through their out-pointers."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], fail

    def _ret(self, name):
        self.calls.append(name)
        return 700 if name == self.fail else 0

    def cuStreamBeginCapture_v2(self, stream, mode):  # noqa: N802
        assert mode == graphs.RELAXED and stream.value == 1234
        return self._ret("begin")

    def cuStreamEndCapture(self, stream, out):  # noqa: N802
        out._obj.value = 42
        return self._ret("end")

    def cuGraphInstantiateWithFlags(self, out, graph, flags):  # noqa: N802
        assert graph.value == 42 and flags == 0
        out._obj.value = 43
        return self._ret("instantiate")

    def cuGraphLaunch(self, exe, stream):  # noqa: N802
        assert exe.value == 43 and stream.value == 1234
        return self._ret("launch")

    def cuGraphExecDestroy(self, exe):  # noqa: N802
        return self._ret("exec_destroy")

    def cuGraphDestroy(self, graph):  # noqa: N802
        return self._ret("destroy")

    def cuGetErrorString(self, code, out):  # noqa: N802
        out._obj.value = b"an illegal memory access was encountered"
        return 0


def test_driver_api_by_ctypes():
    class S:
        handle = 1234

    lib = FakeLib()
    a = graphs.DriverGraphs(lib)
    a.begin(S)
    g = a.end(S)
    e = a.instantiate(g)
    a.launch(e, S)
    a.free(g, e)
    assert lib.calls == ["begin", "end", "instantiate", "launch", "exec_destroy", "destroy"]
    bad = graphs.DriverGraphs(FakeLib(fail="launch"))
    with pytest.raises(RuntimeError, match="graph launch failed with CUDA error 700: an illegal memory"):
        bad.launch(e, S)
    with pytest.raises(graphs.GraphsUnavailable, match="has no cuStreamBeginCapture_v2"):
        graphs.DriverGraphs(object())


def test_api_prefers_pycuda_bindings(fake_gpu, monkeypatch):
    assert isinstance(graphs.api(), graphs.PycudaGraphs)
    monkeypatch.setattr(graphs, "_api", None)
    monkeypatch.setattr(fake_gpu, "Stream", None)
    monkeypatch.setattr(graphs, "_driver_library", lambda: FakeLib())
    assert isinstance(graphs.api(), graphs.DriverGraphs)


# ---- the devstate kernels against their PTX ----------------------------------------------------------------------


@pytest.mark.skipif(loader.find_nvcc() is None, reason="nvcc not found")
def test_devstate_philox_launches_match_the_kernels(tmp_path):
    """The graph variants of the Philox launches pack what kernels/random.cu's *_devstate kernels take."""
    import cuda_harness as harness

    nvcc = loader.find_nvcc()
    cu = loader.KERNEL_DIR / "random.cu"
    ptx = tmp_path / "random.ptx"
    res = subprocess.run(
        [nvcc, "--ptx", "-arch=compute_80", "-std=c++17", *loader.include_flags(), "-o", str(ptx), str(cu)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    sigs = {"random": harness.parse_ptx_signatures(ptx.read_text())}
    with harness.fake_gpu(sigs) as recs:
        cap = graphs.Capture(None, 5)
        graphs._capture = cap
        try:
            for kind, code in (("uniform", 3), ("uniform", 4), ("normal", 3), ("normal", 4), ("u32", 3)):
                assert kernels_nn.philox_fill(kind, code, 1, 2, 1 << 40, 11, 0.0, 1.0) > 0
        finally:
            graphs._capture = None
    assert [r.problem for r in recs if r.problem] == []
    assert sorted(r.kernel for r in recs) == sorted(
        f"philox_{k}_devstate" for k in ("uniform_f32", "uniform_f64", "normal_f32", "normal_f64", "u32")
    )
    assert cap.rng_used == 5 and cap.rng_host[:5].tolist() == [[1, 2]] * 5


# ---- without pycuda ----------------------------------------------------------------------------------------------


def test_cpu_jit_never_imports_the_graph_module(tmp_path):
    (tmp_path / "pycuda").mkdir()
    (tmp_path / "pycuda" / "__init__.py").write_text("")
    (tmp_path / "pycuda" / "driver.py").write_text("raise ImportError('stand-in pycuda')\n")
    code = (
        "import sys, plast\n"
        "f = plast.jit(lambda x: (x * 2 + plast.rand(3)).sum())\n"
        "[f(plast.ones(3)) for _ in range(3)]\n"
        "bad = [m for m in sys.modules if m.startswith('pycuda') or m.startswith('plast._core.cuda_driver.')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr


# ---- on a real GPU ---------------------------------------------------------------------------------------------


def _xor(device, use_jit, steps=40):
    nn, optim = pytest.importorskip("plast.nn"), pytest.importorskip("plast.optim")
    plast.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    opt = optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    x = plast.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=device)
    y = plast.tensor([[0.0], [1.0], [1.0], [0.0]], device=device)

    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = plast.jit(train_step) if use_jit else train_step
    losses = []
    for _ in range(steps):
        losses.append(step(x, y).item())
        plast.reset_transient_arenas()
    return losses, step


@pytest.mark.cuda
@needs_gpu
def test_gpu_xor_training_under_jit_matches_the_cpu():
    cpu, _ = _xor("cpu", False)
    before = graphs.stats()["launches"]
    gpu, step = _xor("cuda", True)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-6)
    assert step.traces == 1 and step.replays == len(gpu) - 1
    assert graphs.stats()["launches"] - before == step.replays  # every replay is one graph launch


@pytest.mark.cuda
@needs_gpu
def test_gpu_graph_equals_step_by_step(monkeypatch):
    rng = np.random.default_rng(0)
    data = _data(rng, "cuda")
    results = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("PLAST_CUDA_GRAPHS", mode)
        params = _params("cuda")
        step = plast.jit(_train_step(params, p_drop=0.25))
        plast.manual_seed(5)
        results[mode] = (_run(step, data, 8), [p.detach().numpy() for p in params])
        (plan,) = step.plans.values()
        assert bool(plan.graph) == (mode == "1")
    for (la, pa), (lb, pb) in zip(results["1"][0], results["0"][0]):
        np.testing.assert_allclose(la, lb, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(pa, pb, rtol=1e-6, atol=1e-7)
    for a, b in zip(results["1"][1], results["0"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
