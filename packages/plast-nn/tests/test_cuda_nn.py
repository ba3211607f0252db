"""plast-nn on CUDA tensors: Module.to / .cuda / .cpu, optimizer state on its parameters' device, state dicts
saved from and loaded into a model on the GPU, and layers that make no CPU tensor of their own for a GPU input.

Two kinds of test:

* a fake driver, run everywhere (the one of plast-core's tests/test_cuda_wiring.py, copied: plast-nn's tests run
  where core's tests are not installed). Host memory stands in for the GPU; transfers, host reads and op
  recording are real, and no kernel can run, so these check where tensors are and what values they hold after
  moves, and that forward passes record on the GPU (lazily) without mixing devices;
* ``@pytest.mark.cuda`` tests on a real GPU, skipped with the reason elsewhere: training and generation on
  "cuda" against the same run on the CPU.
"""

import copy

import fake_cuda as fake_cuda_mod
import numpy as np
import pytest

import plast
import plast._core.cuda_driver as cuda_backend
import plast.nn as nn
import plast.nn.functional as F
import plast.optim as optim
from plast._core.cuda_driver import CudaUnavailableError
from plast.memory import arenas as _arenas

needs_gpu = pytest.mark.skipif(
    not cuda_backend.is_available(), reason=f"CUDA backend not available: {cuda_backend.unavailable_reason()}"
)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- a fake driver (fake_cuda) ------------------------------------------------------------------


@pytest.fixture
def fake_cuda(monkeypatch):
    """A "GPU" made of host memory behind plast's CUDA backend (kernels cannot run on it)."""
    with fake_cuda_mod.installed(monkeypatch) as drv:
        yield drv


@pytest.fixture
def no_cuda(monkeypatch):
    """CUDA unavailable (pycuda missing), whatever this machine has."""
    saved = _arenas._arenas.pop("cuda", None)
    reason = "pycuda is not installed (pip install 'plast-core[cuda]'): No module named 'pycuda'"
    monkeypatch.setattr(cuda_backend, "_probe", (False, reason, {}))
    yield reason
    _arenas._arenas.pop("cuda", None)
    if saved is not None:
        _arenas._arenas["cuda"] = saved


@pytest.fixture
def fused_calls(monkeypatch):
    """The fused optimizer ops run all their argument checks (devices included) and then, instead of a kernel,
    record (op name, inputs, args, mutated indices) here."""
    from plast.ops import optim as optim_ops
    from plast.ops import optim_rmsprop

    calls = []

    def record(op, inputs, args, mutated):
        calls.append((op.name, list(inputs), args, mutated))

    monkeypatch.setattr(optim_ops, "apply_mutation", record)
    monkeypatch.setattr(optim_rmsprop, "apply_mutation", record)
    return calls


# ---- helpers -------------------------------------------------------------------------------------------------


class Net(nn.Module):
    """Parameters, a tied weight, an absent bias, float and integer buffers (one a transposed view), a
    non-persistent buffer and BatchNorm's running statistics."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
        self.head = nn.Linear(4, 2, bias=False)
        self.head.weight = self.body[3].weight  # tied: one Parameter reachable twice
        self.register_buffer("table", plast.tensor([[1, 2, 3], [4, 5, 6]]).T)
        self.register_buffer("scale", plast.tensor([0.5, -1.5, 2.25]))
        self.register_buffer("scratch", plast.zeros(2), persistent=False)

    def forward(self, x):
        h = self.body[:3](x)
        return self.body[3](h) + self.head(h)


def _net(rng, grads=True):
    plast.manual_seed(0)
    m = Net()
    if grads:  # every parameter but the first has a gradient (non-uniform values)
        for i, p in enumerate(m.parameters()):
            if i:
                p.grad = plast.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    return m


def _host(t):
    return None if t is None else t.detach().cpu().numpy().copy()


def _snapshot(m):
    """name -> (object, values, grad values, dtype) of every parameter and buffer (persistent or not)."""
    snap = {}
    for name, p in m.named_parameters():
        snap[name] = (p, _host(p), _host(p.grad), p.dtype)
    for name, b in m.named_buffers():
        snap[name] = (b, _host(b), None, b.dtype)
    return snap


def _check_moved(m, snap, device, float_dtype=None):
    """Every parameter (same object), gradient and buffer of m is on `device` with the snapshot's values, floats
    cast to `float_dtype` when given."""
    params = dict(m.named_parameters())
    buffers = dict(m.named_buffers())
    assert set(params) | set(buffers) == set(snap)
    for name, (obj, values, grad, dtype) in snap.items():
        want_dt = float_dtype if float_dtype is not None and dtype.is_floating_point else dtype
        if name in params:
            p = params[name]
            assert p is obj, f"{name}: the Parameter object was replaced"
            assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf and p.grad_fn is None
            assert p.device == device and p.dtype == want_dt, (name, p.device, p.dtype)
            assert p.is_cuda == (plast.device(device).type == "cuda")
            np.testing.assert_array_equal(_host(p), values.astype(want_dt.np))
            if grad is None:
                assert p.grad is None
            else:
                assert p.grad.device == device and p.grad.dtype == want_dt, (name, p.grad.device)
                np.testing.assert_array_equal(_host(p.grad), grad.astype(want_dt.np))
        else:
            b = buffers[name]
            assert b.device == device and b.dtype == want_dt, (name, b.device, b.dtype)
            np.testing.assert_array_equal(_host(b), values.astype(want_dt.np))
        # moved values live in persistent memory: a reset of the transient arenas leaves them readable
        t = params.get(name, buffers.get(name))
        assert t._storage.arena is None or not t._storage.arena.transient, name
    assert m.head.weight is m.body[3].weight  # still tied


# ---- Module.to / .cuda / .cpu on the fake GPU ------------------------------------------------------------------

MOVES = {
    "to('cuda')": lambda m: m.to("cuda"),
    "to(device)": lambda m: m.to(plast.device("cuda")),
    "to(Device.CUDA)": lambda m: m.to(plast.Device.CUDA),
    "to(device='cuda:0')": lambda m: m.to(device="cuda:0"),
    "to(0)": lambda m: m.to(0),
    "cuda()": lambda m: m.cuda(),
    "cuda(0)": lambda m: m.cuda(0),
    "to(cuda float32 tensor)": lambda m: m.to(plast.zeros(1, device="cuda")),
}


@pytest.mark.parametrize("how", sorted(MOVES))
def test_module_moves_to_the_gpu_and_back(fake_cuda, rng, how):
    m = _net(rng)
    snap = _snapshot(m)
    key_before = m.body[0]._jit_key()
    assert MOVES[how](m) is m
    plast.reset_transient_arenas()
    _check_moved(m, snap, "cuda")
    assert m.body[0]._jit_key() != key_before  # a @plast.jit trace of the module retraces after a move
    assert all(v.device == "cuda" for v in m.state_dict().values())
    assert m.cpu() is m
    plast.reset_transient_arenas()
    _check_moved(m, snap, "cpu")
    assert m.to("cpu") is m and m.cuda() is m and m.cuda() is m  # moving to where it is already is free
    _check_moved(m, snap, "cuda")


@pytest.mark.parametrize(
    "how",
    [
        lambda m: m.to("cuda", plast.float64),
        lambda m: m.to(dtype=plast.float64, device="cuda"),
        lambda m: m.to(plast.float64).cuda(),
        lambda m: m.double().to("cuda", non_blocking=True),
        lambda m: m.to(plast.zeros(1, dtype=plast.float64, device="cuda")),
    ],
    ids=[
        "to(cuda, f64)",
        "to(dtype=, device=)",
        "to(f64).cuda()",
        "double().to(cuda)",
        "to(f64 cuda tensor)",
    ],
)
def test_module_dtype_and_device_together(fake_cuda, rng, how):
    """Casts next to a move run on the CPU side (no device kernel needed, which the fake proves); integer
    buffers keep their dtype."""
    m = _net(rng)
    snap = _snapshot(m)
    assert how(m) is m
    _check_moved(m, snap, "cuda", float_dtype=plast.float64)
    assert m.table.dtype == plast.int64
    # back down: download first, then cast on the host; float32 -> float64 -> float32 is exact
    assert m.to("cpu", plast.float32) is m
    _check_moved(m, snap, "cpu", float_dtype=plast.float32)


def test_a_module_with_nothing_to_move(fake_cuda):
    m = nn.Sequential(nn.ReLU(), nn.Identity())
    assert m.cuda() is m and m.cpu() is m and m.to("cuda", plast.float64) is m
    lin = nn.Linear(2, 2, bias=False)
    assert lin.cuda().bias is None and lin.weight.device == "cuda"


def test_optimizer_made_before_the_move_still_holds_the_parameters(fake_cuda, rng, fused_calls):
    m = _net(rng)
    opt = optim.SGD(m.parameters(), lr=0.1)
    m.cuda()
    opt.step()
    (call,) = fused_calls
    params = [p for p in m.parameters() if p.grad is not None]
    n = len(params)
    assert call[1][1 : 1 + n] == params and all(t.device == "cuda" for t in call[1])


def test_bad_moves_raise_and_leave_the_module_where_it_was(fake_cuda, rng):
    m = _net(rng)
    snap = _snapshot(m)
    with pytest.raises(TypeError, match="floating point"):
        m.to("cuda", plast.int64)
    with pytest.raises(ValueError, match="expected a CUDA device"):
        m.cuda("cpu")
    with pytest.raises(NotImplementedError, match="one GPU"):
        m.cuda(1)
    with pytest.raises(NotImplementedError, match="one GPU"):
        m.to("cuda:1")
    with pytest.raises(ValueError, match="unknown device"):
        m.to("tpu")
    with pytest.raises(TypeError, match="at most 2 positional"):
        m.to("cuda", plast.float64, True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        m.to("cuda", copy=True)
    _check_moved(m, snap, "cpu")


def test_moving_without_cuda_says_why(no_cuda, rng):
    m = _net(rng)
    snap = _snapshot(m)
    for move in (lambda: m.cuda(), lambda: m.to("cuda"), lambda: m.to("cuda", plast.float64)):
        with pytest.raises(CudaUnavailableError, match="pycuda is not installed"):
            move()
        _check_moved(m, snap, "cpu")
    with pytest.raises(NotImplementedError, match=r"CUDA device as a layer argument \(device='cuda'\)"):
        nn.Linear(2, 3, device="cuda")


# ---- optimizers ----------------------------------------------------------------------------------------------

OPTIMIZERS = {
    "SGD": (lambda ps: optim.SGD(ps, lr=0.1), "sgd_update", [0.1, 0.0, 0.0, 0.0]),
    "SGD-nesterov": (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        "sgd_update",
        [0.1, 0.9, 0.0, 0.01],
    ),
    "Adam": (lambda ps: optim.Adam(ps, lr=1e-3), "adam_update", [1e-3, 0.9, 0.999, 1e-8, 0.0]),
    "AdamW-amsgrad": (
        lambda ps: optim.AdamW(ps, lr=2e-3, betas=(0.8, 0.9), amsgrad=True),
        "adam_update",
        [2e-3, 0.8, 0.9, 1e-8, 0.01],
    ),
    "RMSprop-centered-momentum": (
        lambda ps: optim.RMSprop(ps, lr=1e-2, momentum=0.9, centered=True),
        "rmsprop_update",
        [1e-2, 0.99, 1e-8, 0.0, 0.9],
    ),
}

STATE = {
    "sgd_update": [],
    "adam_update": ["step", "exp_avg", "exp_avg_sq"],
    "rmsprop_update": ["step", "square_avg"],
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_state_and_hyperparameters_on_the_gpu(fake_cuda, rng, fused_calls, name):
    make, op_name, hyper = OPTIMIZERS[name]
    m = _net(rng).cuda()
    opt = make(m.parameters())
    assert not opt.state  # state is made on the first step, on each parameter's device
    opt.zero_grad(set_to_none=True)
    opt.step()
    assert fused_calls == []  # no gradients: nothing to update
    for p in m.parameters():
        p.grad = plast.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32), device="cuda")
    opt.step()
    (call,) = fused_calls
    assert call[0] == op_name
    assert all(t.device == "cuda" for t in call[1]), [str(t.device) for t in call[1]]
    group = opt.param_groups[0]
    h = opt._hyper(group)
    assert h.device == "cuda" and h.dtype == plast.float64 and call[1][0] is h
    np.testing.assert_allclose(h.numpy(), hyper, rtol=1e-12)
    for p in m.parameters():
        st = opt.state[p]
        keys = list(STATE[op_name])
        if op_name == "sgd_update" and group["momentum"]:
            keys.append("momentum_buffer")
            flag = opt._fresh[p]
            assert flag.device == "cuda" and flag.item() == 1.0  # the first update takes the gradient as is
        if group.get("amsgrad"):
            keys.append("max_exp_avg_sq")
        if group.get("centered"):
            keys.append("grad_avg")
        if op_name == "rmsprop_update" and group["momentum"]:
            keys.append("momentum_buffer")
        assert sorted(st) == sorted(keys)
        for k, v in st.items():
            assert v.device == "cuda", (k, v.device)
            if k == "step":
                assert v.dtype == plast.float64 and tuple(v.shape) == () and v.item() == 0.0
            else:
                assert v.dtype == p.dtype and v.shape == p.shape
                np.testing.assert_array_equal(v.numpy(), np.zeros(tuple(p.shape), np.float32))
    # a scheduler's change reaches the same device tensor, written in place
    group["lr"] = 0.5
    fused_calls.clear()
    opt.step()
    assert opt._hyper(group) is h and h.tolist()[0] == 0.5 and fused_calls[0][1][0] is h


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_the_real_update_reaches_the_cuda_kernel(fake_cuda, rng, name):
    """Without the recorder, the fused op accepts the optimizer's tensors and goes to the GPU kernel (which the
    fake can't run): no device check failed on the way."""
    m = _net(rng).cuda()
    opt = OPTIMIZERS[name][0](m.parameters())
    with pytest.raises(RuntimeError, match="runs no kernels"):
        opt.step()


def test_a_group_mixing_devices_raises(fake_cuda):
    cpu = nn.Parameter(plast.ones(3))
    gpu = nn.Parameter(plast.ones(2, 2).cuda())
    for make in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop):
        with pytest.raises(plast.DeviceMismatchError, match=r"parameter group 0 mixes devices.*cpu.*cuda"):
            make([cpu, gpu], lr=0.1)
    opt = optim.Adam([{"params": [cpu]}, {"params": [gpu]}], lr=0.1)  # one device per group is fine
    with pytest.raises(plast.DeviceMismatchError, match=r"parameter group 2 mixes devices"):
        opt.add_param_group({"params": [nn.Parameter(plast.zeros(1).cuda()), nn.Parameter(plast.zeros(1))]})
    assert len(opt.param_groups) == 2
    assert issubclass(plast.DeviceMismatchError, RuntimeError)


def test_a_group_split_by_a_later_move_raises_on_step(fake_cuda, rng, fused_calls):
    m = _net(rng)
    opt = optim.Adam(m.parameters(), lr=0.1)
    m.body[0].cuda()  # only part of the model
    with pytest.raises(plast.DeviceMismatchError, match=r"Adam: parameter group 0 mixes devices"):
        opt.step()
    assert fused_calls == []


def test_groups_on_two_devices_update_separately(fake_cuda, rng, fused_calls):
    a = nn.Linear(3, 2)
    b = nn.Linear(2, 2).cuda()
    for p in [*a.parameters(), *b.parameters()]:
        p.grad = plast.zeros_like(p)
    opt = optim.SGD([{"params": a.parameters()}, {"params": b.parameters(), "lr": 0.5}], lr=0.1, momentum=0.9)
    opt.step()
    assert len(fused_calls) == 2
    by_device = {str(call[1][0].device): call for call in fused_calls}
    assert sorted(by_device) == ["cpu", "cuda"]
    for dev, call in by_device.items():
        assert all(t.device == dev for t in call[1])
    assert by_device["cuda"][1][0].tolist()[0] == 0.5


def test_state_follows_a_model_moved_after_some_steps(fake_cuda, rng, monkeypatch):
    m = _net(rng)
    opt = optim.Adam(m.parameters(), lr=0.1, amsgrad=True)
    opt.step()  # a real step on the CPU: non-zero state
    before = {
        id(p): {k: _host(v) for k, v in opt.state[p].items()} for p in m.parameters() if p.grad is not None
    }
    assert any(np.abs(s["exp_avg"]).sum() > 0 for s in before.values())
    from plast.ops import optim as optim_ops

    calls = []
    monkeypatch.setattr(optim_ops, "apply_mutation", lambda op, inputs, args, mutated: calls.append(inputs))
    m.cuda()
    opt.step()
    (inputs,) = calls
    assert all(t.device == "cuda" for t in inputs)
    for p in m.parameters():
        if p.grad is None:
            continue
        for k, v in opt.state[p].items():
            assert v.device == "cuda"
            np.testing.assert_array_equal(_host(v), before[id(p)][k])


def test_sgd_flags_follow_a_moved_model(fake_cuda, rng, fused_calls):
    m = _net(rng)
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    opt.step()
    m.cuda()
    fused_calls.clear()
    opt.step()
    (call,) = fused_calls
    assert all(t.device == "cuda" for t in call[1])
    assert all(f.device == "cuda" for f in opt._fresh.values())


def test_optimizer_state_dict_loads_onto_the_parameters_device(fake_cuda, rng):
    m = _net(rng)
    opt = optim.AdamW(m.parameters(), lr=0.1)
    opt.step()  # a real step on the CPU
    sd = opt.state_dict()
    want = {i: {k: _host(v) for k, v in s.items()} for i, s in sd["state"].items()}
    for float_dtype in (plast.float32, plast.float64):
        gm = copy.deepcopy(m).to("cuda", float_dtype)
        gopt = optim.AdamW(gm.parameters(), lr=0.1)
        gopt.load_state_dict(sd)
        params = list(gm.parameters())
        for i, s in want.items():
            st = gopt.state[params[i]]
            assert st["step"].device == "cuda" and st["step"].dtype == plast.float64
            assert st["step"].item() == s["step"].item() == 1.0
            for k in ("exp_avg", "exp_avg_sq"):
                assert st[k].device == "cuda" and st[k].dtype == float_dtype
                np.testing.assert_array_equal(_host(st[k]), s[k].astype(float_dtype.np))
                assert st[k] is not sd["state"][i][k]
        # and back: the GPU optimizer's state into one of a CPU model
        back = optim.AdamW(m.parameters(), lr=0.1)
        back.load_state_dict(gopt.state_dict())
        for i, s in want.items():
            st = back.state[list(m.parameters())[i]]
            assert st["exp_avg"].device == "cpu" and st["exp_avg"].dtype == plast.float32
            np.testing.assert_array_equal(st["exp_avg"].numpy(), s["exp_avg"])


# ---- state dicts and plast.save / plast.load -----------------------------------------------------------------


def test_save_a_gpu_model_and_load_it_into_another(fake_cuda, rng, tmp_path):
    m = _net(rng).cuda()
    snap = {k: _host(v) for k, v in m.state_dict().items()}
    path = tmp_path / "model.safetensors"
    plast.save(m.state_dict(), path)
    loaded = plast.load(path, map_location="cpu")  # the default puts them back on the GPU, as torch.load
    assert list(loaded) == list(snap)
    for k, v in loaded.items():
        assert v.device == "cpu"
        np.testing.assert_array_equal(v.numpy(), snap[k])
    # a fresh model on the GPU takes the host checkpoint in place (same Parameter objects, still on the GPU)
    plast.manual_seed(1)
    other = Net().cuda()
    params = list(other.parameters())
    res = other.load_state_dict(loaded)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert all(a is b for a, b in zip(other.parameters(), params))
    for k, v in other.state_dict().items():
        assert v.device == "cuda"
        np.testing.assert_array_equal(_host(v), snap[k])
    # and a GPU state dict loads into a CPU model
    cpu = Net()
    cpu.load_state_dict(m.state_dict())
    for k, v in cpu.state_dict().items():
        assert v.device == "cpu"
        np.testing.assert_array_equal(v.numpy(), snap[k])


def test_save_nested_gpu_state_and_views(fake_cuda, rng, tmp_path, fused_calls):
    m = _net(rng).cuda()
    opt = optim.Adam(m.parameters(), lr=0.1)
    opt.step()  # recorded, not run: the state is zeros on the GPU
    a = rng.standard_normal((4, 6)).astype(np.float32)
    view = plast.tensor(a, device="cuda").T[1:, ::2]  # a non-contiguous view of GPU memory
    path = tmp_path / "ckpt.safetensors"
    plast.save({"model": m.state_dict(), "optim": opt.state_dict(), "view": view, "epoch": 3}, path)
    back = plast.load(path)
    assert back["epoch"] == 3
    np.testing.assert_array_equal(back["view"].numpy(), a.T[1:, ::2])
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(back["model"][k].numpy(), _host(v))
    st = back["optim"]["state"]
    assert st and all(s["step"].item() == 0.0 for s in st.values())
    gopt = optim.Adam(m.parameters(), lr=0.1)
    gopt.load_state_dict(back["optim"])
    assert all(v.device == "cuda" for s in gopt.state.values() for v in s.values())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_zero_dim_tensors_keep_their_shape_through_a_file(fake_cuda, tmp_path, device):
    """BatchNorm's num_batches_tracked and an optimizer's step are 0-d: they come back 0-d, so the file loads
    into a model again."""
    bn = nn.BatchNorm1d(3).to(device)
    path = tmp_path / "bn.safetensors"
    plast.save(bn.state_dict(), path)
    back = plast.load(path)
    assert tuple(back["num_batches_tracked"].shape) == () and back["num_batches_tracked"].item() == 0
    bn.load_state_dict(back)
    plast.save(
        {"step": plast.tensor(3.0, dtype=plast.float64, device=device), "nested": [plast.tensor(1)]}, path
    )
    back = plast.load(path)
    assert tuple(back["step"].shape) == () and back["step"].item() == 3.0
    assert tuple(back["nested"][0].shape) == () and back["nested"][0].item() == 1


def test_batchnorm_checkpoint_without_num_batches_tracked_loads_on_the_gpu(fake_cuda):
    bn = nn.BatchNorm1d(3).cuda()
    sd = {k: v.cpu() for k, v in bn.state_dict().items() if not k.endswith("num_batches_tracked")}
    bn.load_state_dict(sd)
    assert bn.num_batches_tracked.device == "cuda" and bn.num_batches_tracked.item() == 0


# ---- layers make their tensors on the input's device ---------------------------------------------------------


def _f(rng, *shape):
    return plast.tensor(rng.standard_normal(shape).astype(np.float32), device="cuda")


def _ids(rng, high, *shape):
    return plast.tensor(rng.integers(0, high, shape), device="cuda")


GPT_CFG = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)

FORWARDS = {
    "Linear": lambda r: nn.Linear(3, 4).cuda()(_f(r, 2, 3)),
    "Conv2d": lambda r: nn.Conv2d(2, 3, 3, padding=1).cuda()(_f(r, 1, 2, 5, 5)),
    "BatchNorm1d eval": lambda r: nn.BatchNorm1d(3).cuda().eval()(_f(r, 4, 3)),
    "LayerNorm": lambda r: nn.LayerNorm(3).cuda()(_f(r, 4, 3)),
    "Embedding padding_idx": lambda r: nn.Embedding(5, 3, padding_idx=0).cuda()(_ids(r, 5, 2, 4)),
    "MultiheadAttention zero_attn bias_kv": lambda r: nn.MultiheadAttention(
        8, 2, batch_first=True, add_zero_attn=True, add_bias_kv=True
    ).cuda()(_f(r, 2, 3, 8), _f(r, 2, 3, 8), _f(r, 2, 3, 8))[0],
    "MultiheadAttention key_padding_mask": lambda r: nn.MultiheadAttention(8, 2, batch_first=True).cuda()(
        *(_f(r, 2, 3, 8),) * 3, key_padding_mask=plast.tensor([[False, False, True]] * 2, device="cuda")
    )[0],
    "TransformerBlockStack causal + attn_mask": lambda r: nn.TransformerBlockStack(
        1, 8, 2, causal=True
    ).cuda()(_f(r, 2, 3, 8), attn_mask=~nn.causal_mask(3, device="cuda")),
    "TransformerLM learned": lambda r: nn.TransformerLM(11, 8, 2, 1, 6).cuda()(
        _ids(r, 11, 2, 4), _ids(r, 11, 2, 4)
    )[1],
    "TransformerLM sinusoidal": lambda r: nn.TransformerLM(11, 8, 2, 1, 6, positional="sinusoidal").cuda()(
        _ids(r, 11, 2, 4), _ids(r, 11, 2, 4)
    )[1],
    "LearnedPositionalEmbedding offset": lambda r: nn.LearnedPositionalEmbedding(8, 4).cuda()(
        _f(r, 2, 3, 4), offset=2
    ),
    "GPT loss": lambda r: nn.GPT(nn.GPTConfig(**GPT_CFG)).cuda()(_ids(r, 11, 2, 5), _ids(r, 11, 2, 5))[1],
    "GPT last logits": lambda r: nn.GPT(nn.GPTConfig(**GPT_CFG)).cuda()(_ids(r, 11, 2, 5))[0],
    "CrossEntropyLoss weight smoothing": lambda r: nn.CrossEntropyLoss(
        weight=plast.tensor([0.5, 1.0, 2.0], device="cuda"), label_smoothing=0.1
    )(_f(r, 4, 3), _ids(r, 3, 4)),
    "NLLLoss": lambda r: nn.NLLLoss()(_f(r, 4, 3), _ids(r, 3, 4)),
    "MSELoss": lambda r: nn.MSELoss()(_f(r, 4, 3), _f(r, 4, 3)),
    "SmoothL1Loss": lambda r: nn.SmoothL1Loss(beta=0.5)(_f(r, 4, 3), _f(r, 4, 3)),
    "pools": lambda r: nn.AvgPool2d(2)(nn.MaxPool2d(2)(_f(r, 1, 1, 8, 8))),
    "scaled_dot_product_attention causal": lambda r: F.scaled_dot_product_attention(
        _f(r, 1, 2, 4, 4), _f(r, 1, 2, 4, 4), _f(r, 1, 2, 4, 4), is_causal=True
    ),
}


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_forward_records_on_the_gpu_only(fake_cuda, rng, name):
    """A forward pass of a GPU model on GPU inputs records (lazily: nothing runs on the fake) without a
    DeviceMismatchError, which any tensor a layer made on the CPU would raise; the result is on the GPU."""
    plast.manual_seed(0)
    out = FORWARDS[name](rng)
    assert out.device == "cuda" and out._storage is None


def test_causal_mask_on_the_device(fake_cuda):
    for dt in (None, plast.float32):
        m = nn.causal_mask(4, dtype=dt, device="cuda")
        assert m.device == "cuda"
        np.testing.assert_array_equal(m.cpu().numpy(), nn.causal_mask(4, dtype=dt).numpy())


# ---- on a real GPU -------------------------------------------------------------------------------------------

TOL = dict(rtol=1e-4, atol=1e-5)


def _xor_run(device, make_opt, steps):
    plast.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    opt = make_opt(model.parameters())
    loss_fn = nn.MSELoss()
    x = plast.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=device)
    y = plast.tensor([[0.0], [1.0], [1.0], [0.0]], device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        plast.reset_transient_arenas()
    return losses, {k: _host(v) for k, v in model.state_dict().items()}


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize(
    "make_opt",
    [
        lambda ps: optim.SGD(ps, lr=0.1),
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        lambda ps: optim.Adam(ps, lr=0.01),
    ],
    ids=["SGD", "SGD-nesterov", "Adam"],
)
def test_gpu_xor_training_matches_the_cpu(make_opt):
    cpu_losses, cpu_state = _xor_run("cpu", make_opt, 30)
    gpu_losses, gpu_state = _xor_run("cuda", make_opt, 30)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    for k in cpu_state:
        np.testing.assert_allclose(gpu_state[k], cpu_state[k], **TOL)


def _gpt_run(device, steps, rng_seed=0):
    plast.manual_seed(0)
    model = nn.GPT(nn.GPTConfig(block_size=16, vocab_size=32, n_layer=2, n_head=2, n_embd=16)).to(device)
    opt = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
    data = np.random.default_rng(rng_seed).integers(0, 32, (4, 17))
    x = plast.tensor(data[:, :-1], device=device)
    y = plast.tensor(data[:, 1:], device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        plast.reset_transient_arenas()
    return model, losses


@pytest.mark.cuda
@needs_gpu
def test_gpu_tiny_gpt_training_and_generation_match_the_cpu(tmp_path):
    cpu_model, cpu_losses = _gpt_run("cpu", 5)
    gpu_model, gpu_losses = _gpt_run("cuda", 5)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    for (k, a), b in zip(cpu_model.state_dict().items(), gpu_model.state_dict().values()):
        assert b.device == "cuda", k
        np.testing.assert_allclose(_host(b), _host(a), **TOL)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    cpu_model.eval()
    gpu_model.eval()
    for use_cache in (True, False):
        want, want_logits = cpu_model.generate(
            plast.tensor(prompt), 6, greedy=True, use_cache=use_cache, return_logits=True
        )
        got, got_logits = gpu_model.generate(
            plast.tensor(prompt, device="cuda"), 6, greedy=True, use_cache=use_cache, return_logits=True
        )
        assert got.device == "cuda"
        for a, b in zip(want_logits, got_logits):
            np.testing.assert_allclose(_host(b), _host(a), rtol=1e-4, atol=1e-4)
        assert got.tolist() == want.tolist()
    # sampling draws on the host: the same generator seed gives the CPU run's tokens
    kw = dict(temperature=0.8, top_k=10, top_p=0.9)
    want = cpu_model.generate(plast.tensor(prompt), 5, generator=plast.Generator().manual_seed(5), **kw)
    got = gpu_model.generate(
        plast.tensor(prompt, device="cuda"), 5, generator=plast.Generator().manual_seed(5), **kw
    )
    assert got.tolist() == want.tolist()
    # the trained GPU model through a file, into a fresh GPU model
    path = tmp_path / "gpt.safetensors"
    plast.save(gpu_model.state_dict(), path)
    fresh = nn.GPT(gpu_model.config).cuda()
    fresh.load_state_dict(plast.load(path))
    fresh.eval()
    idx = plast.tensor(prompt, device="cuda")
    np.testing.assert_allclose(_host(fresh(idx)[0]), _host(gpu_model(idx)[0]), **TOL)


@pytest.mark.cuda
@needs_gpu
def test_gpu_module_casts_on_the_device(rng):
    m = _net(rng).cuda()
    snap = _snapshot(m)
    m.double()  # a cast of GPU tensors, on the GPU
    _check_moved(m, snap, "cuda", float_dtype=plast.float64)
    m.float()
    _check_moved(m, snap, "cuda", float_dtype=plast.float32)
    x = plast.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    m.train()
    cpu = Net()
    cpu.load_state_dict(m.state_dict())  # a GPU state dict into a CPU model
    np.testing.assert_allclose(_host(m(x.cuda())), _host(cpu(x)), **TOL)
    # BatchNorm's running statistics were updated on the device, as on the CPU
    np.testing.assert_allclose(_host(m.body[1].running_mean), _host(cpu.body[1].running_mean), **TOL)
