"""CUDA tensors in the engine: availability errors, device transfers (with their backward), factories, host reads,
arenas, mixed-device errors and fusion by device.

Three kinds of test:

* error paths, run everywhere: CUDA forced unavailable (each reason), every way of asking for a CUDA tensor raises
  CudaUnavailableError naming it, and ``import plast`` never imports pycuda;
* a fake driver, run everywhere: host memory stands in for the part of ``pycuda.driver`` that the device arenas
  and copies use (mem_alloc, memcpy_htod/dtoh/dtod, memset_d8), bounds-checked on every access. Transfers, host
  reads, arena bookkeeping and op recording are real; no kernel can run (loading a module raises);
* ``@pytest.mark.cuda`` tests on a real GPU, skipped with the reason elsewhere.
"""

import os
import subprocess
import sys

import fake_cuda as fake_cuda_mod
import numpy as np
import pytest

import plast
import plast._core.cuda_driver as cuda_backend
from plast._core.cuda_driver import CudaUnavailableError
from plast.graph import chains, fusion
from plast.memory import arenas as _arenas
from plast.ops.registry import OPS

needs_gpu = pytest.mark.skipif(
    not cuda_backend.is_available(), reason=f"CUDA backend not available: {cuda_backend.unavailable_reason()}"
)


# ---- CUDA unavailable ----------------------------------------------------------------------------------------

REASONS = {
    "pycuda": (
        False,
        "pycuda is not installed (pip install 'plast-core[cuda]'): No module named 'pycuda'",
        {},
    ),
    "driver": (False, "no usable NVIDIA driver: cuInit failed: no CUDA-capable device is detected", {}),
    "device": (False, "no CUDA device found", {}),
    "capability": (
        False,
        "Tesla T4 has compute capability 7.5; plast needs 8.0 or newer (Ampere+)",
        {"compute_capability": (7, 5)},
    ),
}


@pytest.fixture
def no_cuda(monkeypatch):
    """CUDA unavailable for one reason at a time; CUDA arenas and kernels as they were afterwards."""
    saved = _arenas._arenas.pop("cuda", None)
    monkeypatch.setattr(cuda_backend, "_probe", None)

    def set_reason(key):
        monkeypatch.setattr(cuda_backend, "_probe", REASONS[key])
        return REASONS[key][1]

    yield set_reason
    _arenas._arenas.pop("cuda", None)
    if saved is not None:
        _arenas._arenas["cuda"] = saved


ASK_FOR_CUDA = {
    "zeros": lambda: plast.zeros(2, device="cuda"),
    "ones": lambda: plast.ones(2, 3, device=plast.Device.CUDA),
    "tensor": lambda: plast.tensor([1.0, 2.0], device="cuda"),
    "randn": lambda: plast.randn(3, device="cuda"),
    "arange": lambda: plast.arange(4, device="cuda:0"),
    ".cuda()": lambda: plast.ones(3).cuda(),
    ".to(cuda)": lambda: plast.ones(3).to("cuda"),
    ".to(device)": lambda: plast.ones(3).to(plast.device("cuda")),
    "init_arenas": lambda: plast.init_arenas(device=plast.Device.CUDA),
    "init_arenas fixed": lambda: plast.init_arenas(
        device="cuda", persistent_bytes=1 << 20, transient_bytes=1 << 20, grow=False
    ),
}


@pytest.mark.parametrize("reason", sorted(REASONS))
@pytest.mark.parametrize("ask", sorted(ASK_FOR_CUDA))
def test_asking_for_cuda_raises_the_reason(no_cuda, reason, ask):
    text = no_cuda(reason)
    with pytest.raises(CudaUnavailableError) as e:
        ASK_FOR_CUDA[ask]()
    assert text in str(e.value) and "CUDA" in str(e.value)
    assert isinstance(e.value, plast.PlastError) and isinstance(e.value, RuntimeError)
    assert e.value.__class__ is plast.cuda.CudaUnavailableError
    assert "cuda" not in _arenas._arenas, "a failed request left CUDA arenas behind"


def test_real_probe_reason_reaches_the_error(no_cuda, monkeypatch):
    """Without pycuda (forced here, so a GPU machine checks the same path) the probe's own reason is raised."""
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(CudaUnavailableError, match="pycuda is not installed"):
        plast.zeros(2, device="cuda")
    monkeypatch.setattr(cuda_backend, "_probe", None)
    monkeypatch.setenv("PLAST_DISABLE_CUDA", "1")
    with pytest.raises(CudaUnavailableError, match="disabled by PLAST_DISABLE_CUDA"):
        plast.ones(2).cuda()
    assert plast.cuda.unavailable_reason() == "disabled by PLAST_DISABLE_CUDA"
    assert plast.cuda.device_count() == 0
    with pytest.raises(CudaUnavailableError, match="synchronize"):
        plast.cuda.synchronize()


def test_cpu_moves_are_free_and_need_no_cuda(no_cuda):
    no_cuda("pycuda")
    x = plast.randn(3, requires_grad=True)
    assert x.cpu() is x and x.to("cpu") is x and x.to(plast.Device.CPU) is x
    assert not x.is_cuda and x.to("cpu", plast.float64).dtype == plast.float64
    assert x.to("cpu", copy=True) is not x


def test_import_plast_never_imports_pycuda(tmp_path):
    # an importable stand-in pycuda, so that an import of it would show in sys.modules even here
    (tmp_path / "pycuda").mkdir()
    (tmp_path / "pycuda" / "__init__.py").write_text("")
    (tmp_path / "pycuda" / "driver.py").write_text("raise ImportError('stand-in pycuda')\n")
    code = (
        "import sys, plast\n"
        "x = plast.randn(4, 3, requires_grad=True)\n"
        "y = (x.cpu().to('cpu') * 2).relu().sum()\n"
        "y.backward()\n"
        "bad = [m for m in sys.modules if m.startswith('pycuda') or m in "
        "('plast.memory.cuda', 'plast.kernels.cuda.kernels', 'plast.kernels.cuda.transfer')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr


# ---- a fake driver (fake_cuda) ------------------------------------------------------------------


@pytest.fixture
def fake_cuda(monkeypatch):
    """A "GPU" made of host memory behind plast's CUDA backend (kernels cannot run on it)."""
    with fake_cuda_mod.installed(monkeypatch) as drv:
        yield drv


DTYPES = [np.float32, np.float64, np.int64, np.int32, np.bool_]


def _array(rng, shape, dt):
    if dt is np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dt, np.integer):
        return rng.integers(-50, 50, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (3,), (2, 0, 3), (4, 5), (2, 3, 4)])
def test_round_trip_values(fake_cuda, rng, dt, shape):
    a = _array(rng, shape, dt)
    x = plast.tensor(a)
    c = x.cuda()
    assert c.device == "cuda" and c.is_cuda and c.dtype == x.dtype and tuple(c.shape) == shape
    back = c.cpu()
    assert back.device == "cpu" and not back.is_cuda
    np.testing.assert_array_equal(back.numpy(), a)
    # host reads of the CUDA tensor itself copy to the host
    np.testing.assert_array_equal(c.numpy(), a)
    assert c.tolist() == a.tolist()
    if a.size == 1:
        assert c.item() == a.item()


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.T,
        lambda t: t[::2],
        lambda t: t[1:, 1:3],
        lambda t: t[:, 2],
        lambda t: t.reshape(4, 6)[:, None, :].expand(4, 3, 6),
        lambda t: t.permute(1, 0)[2:5],
    ],
    ids=["T", "step", "slice", "column", "expand", "permute-slice"],
)
def test_non_contiguous_views_cross_both_ways(fake_cuda, rng, view):
    a = rng.standard_normal((6, 4)).astype(np.float32)
    x = plast.tensor(a)
    want = view(plast.tensor(a)).numpy()
    # a CPU view to the GPU, and a view of a GPU tensor back to the host
    np.testing.assert_array_equal(view(x).cuda().cpu().numpy(), want)
    c = x.cuda()
    v = view(c)
    assert v.device == "cuda" and v._storage is c._storage  # a view of GPU memory, no copy
    np.testing.assert_array_equal(v.cpu().numpy(), want)
    np.testing.assert_array_equal(v.numpy(), want)


def test_transfers_copy_whole_blocks_only(fake_cuda, rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    c = plast.tensor(a).cuda()
    fake_cuda.calls.clear()
    np.testing.assert_array_equal(c.cpu().numpy(), a)
    assert fake_cuda.calls == [("dtoh", a.nbytes)]  # straight into the CPU output: one copy
    fake_cuda.calls.clear()
    plast.tensor(a).cuda()
    assert [c for c in fake_cuda.calls if c[0] != "mem_alloc"] == [("htod", a.nbytes)]


def test_factories_on_the_device(fake_cuda, rng):
    z = plast.zeros(3, 4, device="cuda")
    assert z.device == "cuda" and z.dtype == plast.float32
    assert ("memset", 48) in fake_cuda.calls
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(plast.zeros_like(z).numpy(), np.zeros((3, 4), np.float32))
    assert plast.zeros_like(z).device == "cuda" and plast.zeros_like(plast.ones(2)).device == "cpu"
    assert plast.full((2,), 0, device="cuda").tolist() == [0, 0]
    assert plast.full((2,), False, device="cuda").dtype == plast.bool
    t = plast.tensor([[1, 2], [3, 4]], device="cuda")
    assert t.device == "cuda" and t.dtype == plast.int64 and t.tolist() == [[1, 2], [3, 4]]
    assert plast.tensor(t).device == "cuda"  # a tensor's copy stays on its device
    np.testing.assert_array_equal(plast.arange(5, device="cuda").numpy(), np.arange(5))
    assert str(plast.arange(3, device="cuda:0").device) == "cuda"  # one GPU: cuda:0 is cuda
    np.testing.assert_allclose(plast.linspace(0, 1, 5, device="cuda").numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(plast.eye(3, device="cuda").numpy(), np.eye(3, dtype=np.float32))
    e = plast.empty(2, 2, device="cuda")
    assert e.device == "cuda" and e.shape == (2, 2)
    plast.manual_seed(3)
    want = plast.randint(0, 10, (50,)).numpy()
    plast.manual_seed(3)
    got = plast.randint(0, 10, (50,), device="cuda")
    assert got.device == "cuda"
    np.testing.assert_array_equal(got.numpy(), want)  # host draws, same stream as the CPU
    a = rng.standard_normal(7)
    np.testing.assert_array_equal(plast.tensor(a, dtype=plast.float64, device="cuda").numpy(), a)
    with pytest.raises(NotImplementedError, match="one GPU"):
        plast.zeros(2, device="cuda:1")
    with pytest.raises(NotImplementedError, match="one GPU"):
        plast.ones(2).cuda(1)


def test_first_cuda_tensor_registers_the_kernels(fake_cuda):
    from plast.kernels.cuda import kernels, kernels_nn, transfer

    for op in OPS.values():
        op.kernels.pop("cuda", None)
    plast.zeros(1, device="cuda")
    assert OPS["add"].kernels["cuda"] is kernels.binary
    assert OPS["matmul"].kernels["cuda"] is kernels_nn.matmul
    assert OPS["to_device"].kernels["cuda"] is transfer.copy_to_cuda
    assert all("cuda" in op.kernels for op in OPS.values())


def test_repr_and_scalars(fake_cuda):
    c = plast.tensor([1.5, -2.0]).cuda()
    assert "device='cuda'" in repr(c) and "1.5" in repr(c)
    assert float(c[0:1].cpu()) == 1.5
    # a Python scalar in an op with a CUDA tensor is a CUDA constant (written from the host)
    y = c * 3
    assert y.device == "cuda" and y._node is not None
    consts = [t for t in y._node.inputs if t is not c and t._storage is not None]
    assert consts and consts[0].device == "cuda" and consts[0].item() == 3.0


def test_backward_through_transfers(fake_cuda, rng):
    """d/dx of (x.cuda().cpu() * w).sum() with a non-uniform w: the gradient crosses back through both copies,
    to the source device of each."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    w = plast.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    x = plast.tensor(a, requires_grad=True)
    y = x.cuda()
    assert y.requires_grad and y.grad_fn is not None and y.grad_fn.op.name == "to_device"
    y.retain_grad()
    z = y.cpu()
    assert z.grad_fn.op.name == "to_device"
    g = rng.standard_normal((3, 4)).astype(np.float32)
    (z * w).backward(plast.tensor(g))
    assert x.grad.device == "cpu" and y.grad.device == "cuda"
    np.testing.assert_array_equal(x.grad.numpy(), g * w.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), g * w.numpy())

    import torch

    tx = torch.tensor(a, requires_grad=True)
    (tx.to("cpu", copy=True) * torch.tensor(w.numpy())).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_grad_free_transfers_are_persistent_leaves(fake_cuda):
    x = plast.randn(5)
    c = x.cuda()
    assert c.grad_fn is None and not c._storage.arena.transient
    with plast.no_grad():
        c2 = plast.randn(5, requires_grad=True).cuda()
    assert c2.grad_fn is None and not c2.requires_grad
    plast.reset_transient_arenas()
    np.testing.assert_array_equal(c.cpu().numpy(), x.numpy())


def test_arena_stats_and_stale_reads_on_the_device(fake_cuda):
    assert "cuda" not in plast.arena_stats()  # no CUDA arenas before the first CUDA tensor
    plast.zeros(1, device="cuda")
    stats = plast.arena_stats()["cuda"]
    base = stats["persistent"]["in_use_bytes"]
    assert stats["persistent"]["device"] == "cuda"
    keep = plast.zeros(1000, device="cuda")
    assert plast.arena_stats()["cuda"]["persistent"]["in_use_bytes"] >= base + 4000
    tmp = plast.zeros(1000, device="cuda")
    used = plast.arena_stats()["cuda"]["persistent"]["in_use_bytes"]
    del tmp
    assert plast.arena_stats()["cuda"]["persistent"]["in_use_bytes"] < used  # the block came back
    # an op result (a tracked transfer) lives in the transient arena: a reset makes it stale
    x = plast.ones(3, requires_grad=True)
    y = x.cuda()
    assert y._storage.arena.transient
    assert plast.arena_stats()["cuda"]["transient"]["in_use_bytes"] > 0
    plast.reset_transient_arenas()
    assert plast.arena_stats()["cuda"]["transient"]["in_use_bytes"] == 0
    with pytest.raises(plast.StaleTensorError, match="CUDA tensor"):
        y.cpu()
    with pytest.raises(plast.StaleTensorError):
        y.detach().numpy()
    assert "stale" in repr(y)
    np.testing.assert_array_equal(keep.numpy(), np.zeros(1000, np.float32))  # persistent survives
    # moving a transient GPU leaf to persistent memory (requires_grad_) copies on the device
    z = plast.ones(4, requires_grad=True).cuda().detach()
    assert z._storage.arena.transient
    fake_cuda.calls.clear()
    z.requires_grad_()
    assert not z._storage.arena.transient and ("dtod", 16) in fake_cuda.calls
    np.testing.assert_array_equal(z.detach().numpy(), np.ones(4, np.float32))


def test_init_arenas_on_the_device(fake_cuda):
    plast.init_arenas(device=plast.Device.CUDA, persistent_bytes=4096, transient_bytes=4096, grow=False)
    assert fake_cuda.calls[:2] == [("mem_alloc", 4096), ("mem_alloc", 4096)]
    s = plast.arena_stats()["cuda"]["persistent"]
    assert s["capacity_bytes"] == 4096 and not s["grow"]
    a = plast.zeros(512, device="cuda")  # 2 KiB
    with pytest.raises(plast.ArenaExhaustedError, match=r"init_arenas\(device='cuda'\)"):
        plast.zeros(4096, device="cuda")
    assert a.tolist() == [0.0] * 512
    with pytest.raises(ValueError, match=r"grow=False\) needs"):
        plast.init_arenas(device="cuda", grow=False)


def test_in_place_copy_on_the_device(fake_cuda, rng):
    a = rng.standard_normal(6).astype(np.float32)
    t = plast.zeros(6, device="cuda")
    src = plast.tensor(a, device="cuda")
    with plast.no_grad():
        t.copy_(src)
    np.testing.assert_array_equal(t.numpy(), a)


def test_host_array_is_the_anomaly_hook(fake_cuda):
    """plast.ops.device.host_array is what the scheduler's NaN check reads CUDA outputs with."""
    from plast.ops.device import host_array

    c = plast.tensor([1.0, float("nan"), 2.0], device="cuda")
    arr = host_array(c)
    assert isinstance(arr, np.ndarray) and np.isnan(arr).any() and arr.shape == (3,)
    assert host_array(plast.ones(2)).tolist() == [1.0, 1.0]


def test_planned_block_slices_are_device_storages(fake_cuda):
    from plast.memory.cuda import DeviceStorage

    block = _arenas.transient("cuda").new(4096)
    part = _arenas.view_of(block, 256, 512)
    assert isinstance(part, DeviceStorage) and part.address == block.address + 256
    plast.reset_transient_arenas()
    assert part.is_stale  # as stale as its block, like the CPU's view_of
    cpu_part = _arenas.view_of(_arenas.transient("cpu").new(128), 64, 64)
    assert not isinstance(cpu_part, DeviceStorage)


def test_kernels_never_run_on_the_fake(fake_cuda):
    """The fake is honest: anything that needs a kernel fails instead of computing on the host."""
    c = plast.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(RuntimeError, match="runs no kernels"):
        (c + c).cpu()


# ---- mixed devices -------------------------------------------------------------------------------------------

MIXED = {
    "add": lambda c, g: c + g,
    "radd": lambda c, g: g * c,
    "matmul": lambda c, g: c.reshape(2, 2) @ g.reshape(2, 2),
    "cat": lambda c, g: plast.cat([c, g]),
    "where": lambda c, g: plast.where(c > 0, g, g),
    "maximum": lambda c, g: plast.maximum(c, g),
    "index": lambda c, g: g[plast.tensor([0, 1])],
    "index_put": lambda c, g: g.index_put((plast.tensor([0], device="cuda"),), c[:1]),
    "linear": lambda c, g: plast.linear(c.reshape(1, 4), g.reshape(1, 4)),
    "cross_entropy": lambda c, g: plast.cross_entropy(g.reshape(1, 4), plast.tensor([1])),
    "embedding": lambda c, g: plast.embedding(plast.tensor([0, 1]), g.reshape(2, 2)),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_devices_raise(fake_cuda, name):
    cpu = plast.tensor([1.0, -2.0, 3.0, 4.0])
    gpu = plast.tensor([0.5, 1.0, -1.0, 2.0], device="cuda")
    with pytest.raises(plast.DeviceMismatchError, match="cuda"):
        MIXED[name](cpu, gpu)
    assert issubclass(plast.DeviceMismatchError, RuntimeError)


# ---- fusion by device ----------------------------------------------------------------------------------------


def _graph(root):
    """(order, internal outputs) of the unrealized graph under `root`: topological, every intermediate
    internal (consumed once, held by nobody)."""
    order, seen = [], set()

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        for t in node.inputs:
            if t._storage is None and t._node is not None:
                visit(t._node)
        order.append(node)

    visit(root._node)
    internal = {(id(t._node), t._index) for n in order for t in n.inputs if t._node is not None}
    return order, internal


def _mlp(device, rng):
    x = plast.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
    w = plast.tensor(rng.standard_normal((3, 5)).astype(np.float32), device=device)
    b = plast.tensor(rng.standard_normal(5).astype(np.float32), device=device)
    return plast.relu(x @ w + b)


def test_fusion_rules_take_the_device_kernel(fake_cuda, rng):
    from plast.kernels.cpu import kernels_fused
    from plast.kernels.cuda import kernels_nn

    out_cpu = _mlp("cpu", rng)
    order, internal = _graph(out_cpu)
    groups, _ = fusion.find_groups(order, internal)
    (g,) = groups.values()
    assert g.rule.name == "matmul_bias_relu" and g.kernel is kernels_fused.addmm_act

    out = _mlp("cuda", rng)
    order, internal = _graph(out)
    assert fusion.may_fuse(order)
    groups, covered = fusion.find_groups(order, internal)
    (g,) = groups.values()
    assert g.rule.name == "matmul_bias_relu" and g.kernel is kernels_nn.addmm_act
    assert len(covered) == 2 and g.args == ("relu",)
    # the plan caches the rule: rebuilding from it (a plan-cache hit) gives the CUDA kernel again
    caps, cov = {}, []
    assert fusion._match(g.rule.pattern, order[-1], internal, caps, cov)
    assert g.rule.build(caps, order[-1])[0] is kernels_nn.addmm_act


def test_cross_entropy_rule_on_the_device(fake_cuda, rng):
    from plast.kernels.cuda import kernels_nn

    x = plast.tensor(rng.standard_normal((5, 3)).astype(np.float32), device="cuda")
    t = plast.tensor([0, 2, 1, 1, 0], device="cuda")
    out = plast.nll_loss(plast.log_softmax(x, 1), t)
    order, internal = _graph(out)
    (g,) = fusion.find_groups(order, internal)[0].values()
    assert g.rule.name == "log_softmax_nll" and g.kernel is kernels_nn.fused_cross_entropy


def test_device_without_fused_kernels_stays_unfused(fake_cuda, rng, monkeypatch):
    out = _mlp("cuda", rng)
    order, internal = _graph(out)
    monkeypatch.setattr(fusion, "_device_kernels", lambda dev: {})
    monkeypatch.setattr(fusion, "_DEVICE_RULES", {})
    assert not fusion.may_fuse(order)
    assert fusion.find_groups(order, internal) == ({}, set())


def test_no_group_spans_two_devices(fake_cuda, rng):
    """Nodes recorded on two devices (which the op layer never produces) are never fused together."""
    from plast.graph._graph import record

    a = plast.randn(2, 3)
    w = plast.randn(3, 4)
    mm = record(OPS["matmul"], (a, w), (), [((2, 4), plast.float32)], plast.device("cpu"))[0]
    b = plast.zeros(4, device="cuda")
    s = record(OPS["add"], (mm, b), (), [((2, 4), plast.float32)], plast.device("cuda"))[0]
    order, internal = _graph(s)
    assert fusion.find_groups(order, internal) == ({}, set())


def test_elementwise_chains_fuse_on_both_devices(fake_cuda, rng):
    """CUDA chains run a generated kernel (kernels/cuda/codegen.py; tested in test_cuda_codegen.py)."""

    def chain(device):
        x, y, z = (plast.tensor(rng.standard_normal(8).astype(np.float32), device=device) for _ in range(3))
        return ((x * y + z).exp() - x).relu()

    for device in ("cpu", "cuda"):
        order, internal = _graph(chain(device))
        ((nodes, _, _),) = chains.find_chains(order, internal, set()).values()
        assert len(nodes) == len(order)


# ---- random fills in place ----------------------------------------------------------------------------------


@pytest.fixture
def host_philox(monkeypatch):
    """The CUDA Philox launcher replaced by the CPU generator writing at the same address (the fake's device memory
    is host memory): what reaches the kernel (address, count, seed, stream offset) is checked, by value."""
    from plast import random as prandom
    from plast.kernels.cpu import _kernels
    from plast.kernels.cuda import kernels, kernels_nn

    monkeypatch.setattr(kernels, "_err_state", {})  # the error flag lives in this fake's memory
    launches = []

    def fill(kind, code, seed, offset, address, n, p1, p2):
        launches.append((kind, code, address, n, p1, p2))
        _kernels.philox_fill(kind, code, seed, offset, address, n, p1, p2)
        return prandom.blocks_for(kind, code, n)

    monkeypatch.setattr(kernels_nn, "philox_fill", fill)
    return launches


@pytest.mark.parametrize("dt", [plast.float32, plast.float64])
@pytest.mark.parametrize(
    "method,args", [("normal_", ()), ("normal_", (0.5, 2.0)), ("uniform_", ()), ("uniform_", (-1.0, 3.0))]
)
def test_random_fills_draw_on_the_device(fake_cuda, host_philox, dt, method, args):
    plast.manual_seed(11)
    want = getattr(plast.empty(5, 7, dtype=dt), method)(*args).numpy()
    after_cpu = plast.get_rng_state().tolist()
    plast.manual_seed(11)
    t = plast.zeros(5, 7, dtype=dt, device="cuda")
    storage, version = t._storage, t._version
    fake_cuda.calls.clear()
    assert getattr(t, method)(*args) is t
    # drawn into t's own memory on the device: no host buffer crossed over, no new block
    assert t._storage is storage and t._version == version + 1
    assert [c for c in fake_cuda.calls if c[0] in ("htod", "mem_alloc")] == []
    (launch,) = host_philox
    assert launch[2] == t._storage.address and launch[3] == 35 and launch[1] == dt.code
    np.testing.assert_array_equal(t.numpy(), want)
    assert plast.get_rng_state().tolist() == after_cpu  # the generator moved as on the CPU


def test_random_fill_of_a_view_and_with_a_generator(fake_cuda, host_philox):
    g = plast.Generator().manual_seed(5)
    want = plast.empty(4, 6).normal_(generator=g).numpy()
    base = plast.zeros(2, 4, 6, device="cuda")
    g.manual_seed(5)
    base[1].normal_(generator=g)  # a contiguous view: its slice of the block, the rest untouched
    np.testing.assert_array_equal(base[1].numpy(), want)
    np.testing.assert_array_equal(base[0].numpy(), np.zeros((4, 6), np.float32))
    assert host_philox[0][2] == base._storage.address + 24 * 4
    empty = plast.zeros(0, 3, device="cuda")
    assert empty.uniform_() is empty and empty.shape == (0, 3)


def test_random_fill_errors_on_the_device(fake_cuda, host_philox):
    with pytest.raises(TypeError, match="floating point"):
        plast.zeros(3, dtype=plast.int64, device="cuda").normal_()
    w = plast.zeros(3, device="cuda").requires_grad_()
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.uniform_()
    with plast.no_grad():
        w.uniform_(2.0, 3.0)  # how an initializer fills a parameter
    assert w.requires_grad and w.is_leaf and all(2.0 <= v < 3.0 for v in w.tolist())
    assert host_philox == [("uniform", 3, w._storage.address, 3, 2.0, 3.0)]


def test_random_fill_in_a_graph_on_the_device(fake_cuda, host_philox):
    """A tensor inside a graph is rebound to fresh draws: what backward saved keeps the old value."""
    x = plast.ones(4, requires_grad=True).cuda()
    assert x.grad_fn is not None
    old = x._storage
    plast.manual_seed(2)
    x.normal_()
    assert x._storage is not old and x.device == "cuda"
    plast.manual_seed(2)
    np.testing.assert_array_equal(x.detach().numpy(), plast.randn(4).numpy())


# ---- copy_ and .to() across devices --------------------------------------------------------------------------

ACROSS = [
    # (destination shape, dtype), (source shape, dtype)
    (((4, 3), np.float32), ((4, 3), np.float32)),
    (((4, 3), np.float32), ((3,), np.float32)),
    (((4, 3), np.float32), ((1, 3), np.float64)),
    (((2, 3, 4), np.float64), ((3, 1), np.float32)),
    (((5,), np.int64), ((5,), np.float32)),
    (((5,), np.float32), ((), np.int64)),
    (((5,), np.bool_), ((5,), np.float32)),
    (((3,), np.int32), ((3,), np.bool_)),
    (((0, 3), np.float32), ((3,), np.float32)),
    (((), np.float64), ((), np.float32)),
    (((2, 1), np.float32), ((1,), np.float32)),
]


def _np_dtype(dt):
    return plast._core.dtypes.from_numpy_dtype(np.dtype(dt))


@pytest.mark.parametrize("direction", ["to_cuda", "to_cpu"])
@pytest.mark.parametrize("dst_spec,src_spec", ACROSS, ids=[f"{d[0]}<-{s[0]}" for d, s in ACROSS])
def test_copy_across_devices_matches_torch(fake_cuda, rng, direction, dst_spec, src_spec):
    import torch

    (dshape, ddt), (sshape, sdt) = dst_spec, src_spec
    a = _array(rng, sshape, sdt)
    if sdt is np.float32 and ddt is np.int64:
        a = a * 10
    dst_dev, src_dev = ("cuda", "cpu") if direction == "to_cuda" else ("cpu", "cuda")
    t = plast.tensor(_array(rng, dshape, ddt), device=dst_dev)
    storage = t._storage
    src = plast.tensor(a, device=src_dev)
    assert t.copy_(src) is t
    want = torch.from_numpy(_array(rng, dshape, ddt)).copy_(torch.from_numpy(np.array(a)))
    assert t._storage is storage and t.device == dst_dev and t.dtype == _np_dtype(ddt)
    np.testing.assert_array_equal(t.numpy(), want.numpy())


def test_copy_across_devices_copies_once(fake_cuda, rng):
    a = rng.standard_normal((64, 32)).astype(np.float32)
    t = plast.zeros(64, 32, device="cuda")
    fake_cuda.calls.clear()
    t.copy_(plast.tensor(a))
    assert fake_cuda.calls == [("htod", a.nbytes)]  # straight into t's memory, no staging block on the device
    c = plast.zeros(64, 32)
    fake_cuda.calls.clear()
    c.copy_(t)
    assert fake_cuda.calls == [("dtoh", a.nbytes)]  # and back, straight into c's memory
    np.testing.assert_array_equal(c.numpy(), a)


def test_copy_across_devices_into_views(fake_cuda, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    base = plast.zeros(2, 3, 4, device="cuda")
    base[1].copy_(plast.tensor(a))  # a contiguous slice of a CUDA block
    np.testing.assert_array_equal(base.numpy(), np.stack([np.zeros_like(a), a]))
    host = plast.zeros(4, 3)
    host.T.copy_(base[1])  # a transposed CPU view takes a GPU tensor
    np.testing.assert_array_equal(host.numpy(), a.T)
    g = plast.zeros(3, 4, device="cuda")
    g.copy_(plast.tensor(a.T.copy()).T)  # a non-contiguous CPU source
    np.testing.assert_array_equal(g.numpy(), a)


def test_copy_across_devices_sees_pending_reads(fake_cuda, rng):
    """A recorded, not yet computed read of the old value is computed before the copy overwrites it."""
    t = plast.tensor([1.0, 2.0, 3.0])
    y = t * 2  # lazy: reads t's memory when realized
    t.copy_(plast.tensor([7.0, 8.0, 9.0], device="cuda"))
    assert y.tolist() == [2.0, 4.0, 6.0] and t.tolist() == [7.0, 8.0, 9.0]
    assert t._version == 1


def test_copy_across_devices_errors(fake_cuda):
    t = plast.zeros(2, 3, device="cuda")
    with pytest.raises(plast.ShapeError, match=r"\(4,\).*\(2, 3\)"):
        t.copy_(plast.zeros(4))
    with pytest.raises(plast.ShapeError):
        plast.zeros(3).copy_(plast.zeros(2, 3, device="cuda"))
    with pytest.raises(TypeError, match="expects a tensor"):
        t.copy_(np.zeros((2, 3)))
    w = plast.zeros(3, device="cuda").requires_grad_()
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.copy_(plast.ones(3))
    with plast.no_grad():
        w.copy_(plast.ones(3))  # loading a parameter's value from the host
    assert w.tolist() == [1.0, 1.0, 1.0] and w.requires_grad


@pytest.mark.parametrize("direction", ["to_cuda", "to_cpu"])
def test_copy_across_devices_backward(fake_cuda, rng, direction):
    """Gradient of copy_ flows back to the source, on the source's device, as in torch."""
    import torch

    a = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    g = rng.standard_normal((2, 3)).astype(np.float32)
    src_dev, dst_dev = ("cpu", "cuda") if direction == "to_cuda" else ("cuda", "cpu")
    x = plast.tensor(a, device=src_dev, requires_grad=True)
    t = plast.zeros(2, 3, device=dst_dev)
    t.copy_(x)
    assert t.requires_grad and t.grad_fn is not None and t.device == dst_dev
    (t.cpu() * plast.tensor(w)).backward(plast.tensor(g))
    assert x.grad.device == src_dev
    tx = torch.tensor(a, requires_grad=True)
    (torch.zeros(2, 3).copy_(tx) * torch.tensor(w)).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_to_with_copy_across_devices(fake_cuda, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = plast.tensor(a)
    c = x.to("cuda", copy=True)
    assert c.device == "cuda" and c._storage is not x._storage
    again = c.to("cuda", copy=True)
    assert again is not c and again.device == "cuda" and again._storage is not c._storage
    assert c.to("cuda") is c and c.to(plast.device("cuda:0")) is c
    back = c.to("cpu", copy=True)
    assert back.device == "cpu" and back._storage is not x._storage
    with plast.no_grad():
        c.copy_(plast.zeros(3, 4))  # the copies are independent of each other and of x
    for t in (x, again, back):
        np.testing.assert_array_equal(t.numpy(), a)
    assert c.tolist() == np.zeros((3, 4)).tolist()
    # the device and the dtype of another tensor (the cast runs on the CPU, after the transfer)
    d = plast.zeros(2, dtype=plast.float64)
    moved = c.to(d)
    assert moved.device == "cpu" and moved.dtype == plast.float64 and moved.tolist() == c.tolist()


# ---- plast.save / plast.load with devices --------------------------------------------------------------------


def _mixed_state(rng):
    return {
        "w": plast.tensor(rng.standard_normal((3, 4)).astype(np.float32), device="cuda"),
        "b": plast.tensor(rng.standard_normal(4).astype(np.float32)),
        "nested": {
            "step": plast.tensor(3.0, dtype=plast.float64, device="cuda"),
            "ids": [plast.tensor([1, 2])],
        },
        "view": plast.tensor(rng.standard_normal((4, 6)).astype(np.float32), device="cuda").T[1:, ::2],
    }


def _flat(obj, prefix=""):
    if isinstance(obj, dict):
        return {k2: v2 for k, v in obj.items() for k2, v2 in _flat(v, f"{prefix}{k}.").items()}
    if isinstance(obj, list):
        return {k2: v2 for i, v in enumerate(obj) for k2, v2 in _flat(v, f"{prefix}{i}.").items()}
    return {prefix[:-1]: obj}


def test_load_puts_tensors_back_on_their_devices(fake_cuda, rng, tmp_path):
    obj = _mixed_state(rng)
    path = tmp_path / "mixed.safetensors"
    plast.save(obj, path)
    want = {k: (str(v.device), v.numpy()) for k, v in _flat(obj).items()}
    back = _flat(plast.load(path))
    assert sorted(back) == sorted(want)
    for k, v in back.items():
        assert str(v.device) == want[k][0], k  # as torch.load: where it was saved
        np.testing.assert_array_equal(v.numpy(), want[k][1])
        assert v.grad_fn is None and not v._storage.arena.transient
    # a flat state dict of GPU tensors, too
    flat = {"a": obj["w"], "b": obj["b"]}
    plast.save(flat, path)
    back = plast.load(path)
    assert back["a"].device == "cuda" and back["b"].device == "cpu"


@pytest.mark.parametrize(
    "map_location,want",
    [
        ("cpu", {"cpu"}),
        (plast.device("cpu"), {"cpu"}),
        (plast.Device.CPU, {"cpu"}),
        ("cuda", {"cuda"}),
        ("cuda:0", {"cuda"}),
        ({"cuda:0": "cpu"}, {"cpu"}),
        ({"cuda": plast.device("cpu")}, {"cpu"}),
        ({"cpu": "cuda"}, {"cuda"}),
        ({"cpu": "cpu"}, {"cpu", "cuda"}),
        (lambda t, loc: t, {"cpu"}),  # torch's idiom `lambda storage, loc: storage`
        (lambda t, loc: None, {"cpu", "cuda"}),
        (lambda t, loc: t.cuda(), {"cuda"}),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_load_map_location(fake_cuda, rng, tmp_path, map_location, want):
    obj = _mixed_state(rng)
    path = tmp_path / "mixed.safetensors"
    plast.save(obj, path)
    back = _flat(plast.load(path, map_location=map_location))
    for k, v in _flat(obj).items():
        np.testing.assert_array_equal(back[k].numpy(), v.numpy())
    assert {str(v.device) for v in back.values()} == want


def test_load_map_location_callable_sees_saved_locations(fake_cuda, tmp_path):
    seen = []
    plast.save(
        {"g": plast.tensor([1.0, 2.0], device="cuda"), "c": plast.zeros(2)}, tmp_path / "x.safetensors"
    )
    plast.load(tmp_path / "x.safetensors", map_location=lambda t, loc: seen.append((loc, t.device.type)))
    assert sorted(seen) == [("cpu", "cpu"), ("cuda", "cpu")]  # the callable gets CPU tensors


# ---- on a real GPU -------------------------------------------------------------------------------------------


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dt", DTYPES)
def test_gpu_round_trip(rng, dt):
    a = _array(rng, (33, 17), dt)
    c = plast.tensor(a).cuda()
    np.testing.assert_array_equal(c.cpu().numpy(), a)
    np.testing.assert_array_equal(c.T.cpu().numpy(), a.T)
    np.testing.assert_array_equal(c[:, 3].numpy(), a[:, 3])
    big = _array(rng, (1024, 1024), dt)  # a column of a large block is gathered on the device
    np.testing.assert_array_equal(plast.tensor(big).cuda()[:, 5].numpy(), big[:, 5])


@pytest.mark.cuda
@needs_gpu
def test_gpu_factories_match_cpu():
    for fn in (plast.rand, plast.randn):
        plast.manual_seed(7)
        want = fn(1001).numpy()
        plast.manual_seed(7)
        got = fn(1001, device="cuda")
        np.testing.assert_allclose(got.numpy(), want, rtol=4e-7, atol=1e-7)
    np.testing.assert_array_equal(plast.ones(2, 3, device="cuda").numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(plast.full((4,), 2.5, device="cuda").numpy(), np.full(4, 2.5, np.float32))


@pytest.mark.cuda
@needs_gpu
def test_gpu_forward_and_backward_match_torch(rng):
    import torch

    a, w = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    b, g = rng.standard_normal(4).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
    x = plast.tensor(a, requires_grad=True)
    pw = plast.tensor(w, device="cuda", requires_grad=True)
    pb = plast.tensor(b, device="cuda", requires_grad=True)
    out = (plast.relu(x.cuda() @ pw + pb) * 2 + 1).exp().T.sum(0)  # fused group, chain-shaped ops, views
    out.backward(plast.tensor(g[:, 0].copy(), device="cuda"))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
    tout = (torch.relu(tx @ tw + tb) * 2 + 1).exp().T.sum(0)
    tout.backward(torch.tensor(g[:, 0].copy()))
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.cpu().detach().numpy(), tout.detach().numpy(), **tol)
    assert x.grad.device == "cpu" and pw.grad.device == "cuda"
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), **tol)
    np.testing.assert_allclose(pb.grad.numpy(), tb.grad.numpy(), **tol)


@pytest.mark.cuda
@needs_gpu
def test_gpu_anomaly_detection_reads_device_outputs():
    x = plast.tensor([1.0, -1.0], device="cuda")
    with plast.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="anomaly detected"):
            plast.log(x).cpu()


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dt", [plast.float32, plast.float64])
def test_gpu_random_fills_match_cpu(dt):
    tol = dict(rtol=4e-7, atol=1e-7) if dt == plast.float32 else dict(rtol=1e-14, atol=1e-14)
    for method, args in (("normal_", (0.5, 2.0)), ("uniform_", (-1.0, 3.0))):
        plast.manual_seed(9)
        want = getattr(plast.empty(301, 7, dtype=dt), method)(*args).numpy()
        want_col = getattr(plast.empty(301, dtype=dt), method)(*args).numpy()
        plast.manual_seed(9)
        got = getattr(plast.empty(301, 7, dtype=dt, device="cuda"), method)(*args)
        col = plast.zeros(301, 3, dtype=dt, device="cuda")
        getattr(col[:, 1], method)(*args)  # a strided view: drawn contiguous, then copied in on the device
        np.testing.assert_allclose(got.numpy(), want, **tol)
        np.testing.assert_allclose(col[:, 1].numpy(), want_col, **tol)
        assert not col[:, 0].numpy().any() and not col[:, 2].numpy().any()
    plast.manual_seed(4)
    want = plast.dropout(plast.ones(1000, dtype=dt), 0.3).numpy()
    plast.manual_seed(4)
    np.testing.assert_allclose(
        plast.dropout(plast.ones(1000, dtype=dt, device="cuda"), 0.3).numpy(), want, **tol
    )


@pytest.mark.cuda
@needs_gpu
def test_gpu_copy_across_devices_broadcasts_into_views(rng):
    import torch

    a = rng.standard_normal((3, 1)).astype(np.float64)
    base = plast.zeros(5, 3, 4, device="cuda")
    view = base.permute(2, 1, 0)[:, :, 1:4]  # (4, 3, 3), not contiguous
    view.copy_(plast.tensor(a))  # broadcast and cast into a strided GPU view
    want = torch.zeros(5, 3, 4)
    want.permute(2, 1, 0)[:, :, 1:4].copy_(torch.tensor(a))
    np.testing.assert_array_equal(base.numpy(), want.numpy())
    # the gradient of a broadcasting copy_ sums over the broadcast dims, back on the source's device
    x = plast.tensor(a, requires_grad=True)
    t = plast.zeros(4, 3, 2, device="cuda")
    t.copy_(x)
    g = rng.standard_normal((4, 3, 2)).astype(np.float32)
    t.backward(plast.tensor(g, device="cuda"))
    tx = torch.tensor(a, requires_grad=True)
    torch.zeros(4, 3, 2).copy_(tx).backward(torch.tensor(g))
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


@pytest.mark.cuda
@needs_gpu
def test_gpu_save_and_load_keeps_devices(rng, tmp_path):
    w = plast.tensor(rng.standard_normal((3, 4)).astype(np.float32), device="cuda")
    plast.save({"w": w, "c": plast.ones(2), "nested": [w.T]}, tmp_path / "g.safetensors")
    back = plast.load(tmp_path / "g.safetensors")
    assert back["w"].device == "cuda" and back["c"].device == "cpu" and back["nested"][0].device == "cuda"
    np.testing.assert_array_equal(back["nested"][0].numpy(), w.numpy().T)
    assert plast.load(tmp_path / "g.safetensors", map_location="cpu")["w"].device == "cpu"
    assert plast.load(tmp_path / "g.safetensors", map_location={"cpu": "cuda"})["c"].device == "cuda"


def test_16bit_tensors_on_cuda_say_they_are_not_supported_yet(fake_cuda):
    """No 16-bit CUDA kernels yet: making, moving or casting to a bfloat16/float16 CUDA tensor is a clear error."""
    x = plast.ones(3).cuda()
    for make in (
        lambda: plast.zeros(3, dtype=plast.bfloat16, device="cuda"),
        lambda: plast.ones(3, dtype=plast.float16).to("cuda"),
        lambda: x.to(plast.bfloat16),
        lambda: x.half(),
    ):
        with pytest.raises(NotImplementedError, match="no 16-bit kernels"):
            make()
    with pytest.raises(NotImplementedError, match="no 16-bit kernels"), plast.autocast("cuda"):
        pass


class _Node:
    def __init__(self, args):
        self.args = args


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_backward_passes_its_reduction_by_name(fake_cuda, rng, monkeypatch, reduction):
    """The launches of cross_entropy's backward, recorded: a mean loss gets its divisor (the sum of the target
    weights, computed by loss_finish with the "sum" reduction) and the backward kernel gets a pointer to it; the
    other reductions need none."""
    from plast._core.codes import REDUCTION_CODES
    from plast.kernels.cuda import kernels, kernels_nn

    monkeypatch.setattr(kernels, "_err_state", {})  # the error flag lives in this fake's memory
    launches = []
    monkeypatch.setattr(
        kernels_nn, "launch", lambda module, fn, grid, block, p: launches.append((fn, p.bytes()))
    )
    x = plast.tensor(rng.standard_normal((4, 5)).astype(np.float32)).to("cuda")
    t = plast.tensor(np.array([0, 1, 2, 3])).to("cuda")
    g = plast.tensor(np.ones(4 if reduction == "none" else (), np.float32)).to("cuda")
    out = plast.zeros((4, 5), device="cuda")
    plast.forward(x, t, g, out)
    kernels_nn.cross_entropy_backward(_Node(("index", None, reduction, 0.0)), [g, x, t], [out])
    names = [fn for fn, _ in launches]
    finish = [p for fn, p in launches if fn.startswith("loss_finish")]
    (bwd,) = [p for fn, p in launches if fn.startswith("loss_bwd")]
    assert np.frombuffer(bwd[:12], np.int32).tolist() == [0, kernels_nn.K_INDEX, REDUCTION_CODES[reduction]]
    if reduction == "mean":
        # the divisor: nll_loss's rows of weights, summed (reduction code, then the nll, smooth and wt pointers)
        assert names.count("loss_finish_f32") == 1 and len(finish) == 1
        kind, red = np.frombuffer(finish[0][:8], np.int32).tolist()
        assert (kind, red) == (kernels_nn.K_NLL, REDUCTION_CODES["sum"])
    else:
        assert not finish
