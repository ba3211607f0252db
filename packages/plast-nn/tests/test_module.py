"""Module API: registration, traversal, state dicts, hooks, modes, repr — against torch.nn.Module's behaviour."""

from collections import OrderedDict

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn


def _pair(lib):
    """The same small model in plast.nn and torch.nn (lib is the nn module)."""

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.Linear(3, 4)
            self.act = lib.ReLU()
            self.register_buffer("running", (plast if lib is nn else torch).zeros(4))
            self.register_buffer("scratch", (plast if lib is nn else torch).ones(2), persistent=False)

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.blocks = lib.ModuleList([Block(), Block()])
            self.head = lib.Sequential(lib.Linear(4, 4), lib.Tanh(), lib.Linear(4, 2, bias=False))
            self.scale = lib.Parameter((plast if lib is nn else torch).ones(1))

        def forward(self, x):
            x = self.blocks[0](x)
            return self.head(x) * self.scale

    return Net


def test_state_dict_keys_and_order_match_torch():
    pm, tm = _pair(nn)(), _pair(torch.nn)()
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in pm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in pm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in pm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in pm.named_children()] == [n for n, _ in tm.named_children()]
    assert "blocks.0.scratch" not in pm.state_dict()  # non-persistent
    assert len(list(pm.buffers())) == 4


def test_state_dict_round_trip_from_torch_gives_same_output():
    pm, tm = _pair(nn)(), _pair(torch.nn)()
    sd = {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    res = pm.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        pm(plast.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


def test_state_dict_is_detached_and_shares_memory():
    m = nn.Linear(2, 3)
    sd = m.state_dict()
    assert isinstance(sd, OrderedDict)
    assert not sd["weight"].requires_grad and sd["weight"]._storage is m.weight._storage
    kv = m.state_dict(keep_vars=True)
    assert kv["weight"] is m.weight
    pre = m.state_dict(prefix="enc.")
    assert list(pre) == ["enc.weight", "enc.bias"]


def test_load_state_dict_copies_in_place():
    m = nn.Linear(2, 3)
    w = m.weight
    st = w._storage
    m.load_state_dict({"weight": plast.ones(3, 2), "bias": plast.zeros(3)})
    assert m.weight is w and w._storage is st
    assert w.tolist() == [[1.0, 1.0]] * 3 and w.requires_grad


def test_load_state_dict_strict_errors():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    good = {k: v.detach().clone() for k, v in m.state_dict().items()}
    bad = dict(good)
    del bad["0.bias"]
    bad["2.extra"] = plast.zeros(1)
    bad["nope.weight"] = plast.zeros(1)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "0.bias"') as e:
        m.load_state_dict(bad)
    assert isinstance(e.value, plast.CheckpointError)
    assert 'Unexpected key(s) in state_dict: "nope.weight", "2.extra"' in str(e.value)
    assert str(e.value).startswith("Error(s) in loading state_dict for Sequential:")
    res = m.load_state_dict(bad, strict=False)
    assert res.missing_keys == ["0.bias"] and res.unexpected_keys == ["nope.weight", "2.extra"]
    assert res == (["0.bias"], ["nope.weight", "2.extra"])
    # the same keys and order as torch reports
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    tbad = {k: torch.tensor(v.numpy()) for k, v in bad.items()}
    assert tuple(tm.load_state_dict(tbad, strict=False)) == tuple(res)
    shape = dict(good)
    shape["2.weight"] = plast.zeros(1, 4)
    with pytest.raises(RuntimeError, match="size mismatch for 2.weight: copying a param with shape"):
        m.load_state_dict(shape, strict=False)  # shape mismatches raise even when not strict, as in torch
    with pytest.raises(TypeError):
        m.load_state_dict([1, 2])


def test_load_state_dict_error_message_matches_torch():
    pm, tm = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    with pytest.raises(RuntimeError) as pe:
        pm.load_state_dict({"weight": plast.zeros(3, 2), "junk": plast.zeros(1)})
    with pytest.raises(RuntimeError) as te:
        tm.load_state_dict({"weight": torch.zeros(3, 2), "junk": torch.zeros(1)})
    assert str(pe.value) == str(te.value)


def test_member_mirror_follows_every_change():
    """Parameters, buffers and children are copied into the instance __dict__ (a plain attribute read is much
    cheaper than Module.__getattr__); every way of changing the three dicts keeps the copy right."""
    import copy

    m = nn.Linear(2, 3)
    w, b = m.weight, m.bias
    assert m.__dict__["weight"] is w and m.weight is w
    del m.bias
    assert "bias" not in m.__dict__ and "bias" not in m._parameters
    with pytest.raises(AttributeError):
        _ = m.bias
    m._parameters["bias"] = b  # written straight into the dict, as weight_norm-style code does
    assert m.bias is b
    m._parameters.pop("bias")
    assert not hasattr(m, "bias")
    m._parameters.setdefault("bias", b)
    assert m.bias is b
    p2 = nn.Parameter(plast.zeros(3, 2))
    m._parameters.update(weight=p2)
    assert m.weight is p2
    m.weight = None
    assert m.weight is None and m._parameters["weight"] is None
    m.weight = w
    name, last = m._parameters.popitem()
    assert name == "bias" and not hasattr(m, "bias")
    m._parameters.clear()
    assert not hasattr(m, "weight") and "weight" not in m.__dict__
    m.weight, m.bias = w, b
    m.register_buffer("scale", plast.ones(3))
    m.scale = plast.full((3,), 2.0)
    assert m.scale.tolist() == [2.0, 2.0, 2.0] and m.__dict__["scale"] is m._buffers["scale"]

    # a name the class defines is never shadowed by the copy (it was never reached through __getattr__)
    m._parameters["forward"] = nn.Parameter(plast.zeros(1))
    assert "forward" not in m.__dict__ and callable(m.forward)
    del m._parameters["forward"]

    # deep copies: the copy's dicts mirror into the copy, and its parameters are new
    seq = nn.Sequential(m, nn.ReLU())
    dup = copy.deepcopy(seq)
    assert dup[0].weight is not w and dup[0].weight is dup[0]._parameters["weight"]
    assert np.array_equal(dup[0].weight.detach().numpy(), w.detach().numpy())
    dup[0].weight = nn.Parameter(plast.zeros(3, 2))
    assert seq[0].weight is w and dup[0].weight is dup[0]._parameters["weight"]
    # shallow copies share parameters but not the dicts, so replacing one in the copy leaves the original
    sh = copy.copy(m)
    assert sh.weight is w and sh._parameters is not m._parameters
    sh.weight = nn.Parameter(plast.zeros(3, 2))
    assert m.weight is w and m._parameters["weight"] is w and sh.weight is sh._parameters["weight"]


def test_dropped_module_frees_its_parameters_at_once():
    # no reference cycle through the mirrored dicts: a dropped model gives its memory back without the cyclic
    # garbage collector
    import gc

    gc.collect()
    gc.disable()
    try:
        before = plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"]
        m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
        assert plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"] > before
        del m
        assert plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"] == before
    finally:
        gc.enable()


def test_registration_routing_and_errors():
    m = nn.Module()
    m.w = nn.Parameter(plast.zeros(2))
    m.sub = nn.Linear(1, 1)
    m.register_buffer("b", plast.ones(1))
    m.plain = 3
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and list(m._buffers) == ["b"]
    # routed into _parameters; the instance dict holds the same object (a mirror, see module._Members)
    assert m.__dict__["w"] is m._parameters["w"] and m.plain == 3
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'w'"):
        m.w = plast.zeros(2)
    m.w = None
    assert m.w is None and list(m.parameters()) == list(m.sub.parameters())
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"):
        m.sub = 3
    with pytest.raises(TypeError, match="as buffer 'b'"):
        m.b = 3
    m.b = plast.zeros(3)
    assert m.b.shape == (3,)
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", plast.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'missing'"):
        _ = m.missing
    del m.sub
    assert "sub" not in m._modules
    # a Parameter replaces a plain attribute of the same name, as in torch
    m.plain = nn.Parameter(plast.ones(1))
    assert "plain" in m._parameters and m.__dict__["plain"] is m._parameters["plain"]

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(plast.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter"):
        m.register_parameter("q", plast.zeros(1))


def test_buffer_marker_registers_buffer():
    m = nn.Module()
    m.stat = nn.Buffer(plast.zeros(2), persistent=False)
    assert "stat" in m._buffers and "stat" not in m.state_dict()


def test_tied_parameters_appear_once():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    m = nn.Sequential(a, b)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(m.parameters())) == 3
    assert list(m.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]  # state dicts keep both
    assert len(list(m.named_parameters(remove_duplicate=False))) == 4
    shared = nn.Sequential(a, a)
    assert len(list(shared.modules())) == 2 and len(list(shared.parameters())) == 2


def test_train_eval_recursive_and_apply():
    m = _pair(nn)()
    assert all(x.training for x in m.modules())
    assert m.eval() is m and not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    with pytest.raises(ValueError, match="boolean"):
        m.train("no")
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    t = _pair(torch.nn)()
    tseen = []
    t.apply(lambda mod: tseen.append(type(mod).__name__))
    assert seen == tseen


def test_requires_grad_and_zero_grad():
    m = nn.Linear(2, 2)
    m(plast.ones(1, 2)).sum().backward()
    assert m.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert m.weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    m.zero_grad()
    assert m.weight.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_forward_hooks_and_pre_hooks():
    m = nn.Linear(2, 2)
    log = []
    h1 = m.register_forward_pre_hook(lambda mod, args: log.append(("pre", mod is m)))
    h2 = m.register_forward_hook(lambda mod, args, out: log.append(("post", tuple(out.shape))))
    h3 = m.register_forward_hook(lambda mod, args, out: out * 0)
    out = m(plast.ones(3, 2))
    assert log == [("pre", True), ("post", (3, 2))] and out.tolist() == [[0.0, 0.0]] * 3
    h3.remove()
    h2.remove()
    h1.remove()
    log.clear()
    assert m(plast.ones(1, 2)).abs().sum().item() > 0 and log == []
    # a pre-hook can replace the input; a kwargs hook sees kwargs; prepend puts a hook first
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    assert m(plast.ones(1, 2)).tolist() == [m.bias.tolist()]
    order = []
    m.register_forward_hook(lambda *a: order.append("a"))
    m.register_forward_hook(lambda *a: order.append("b"), prepend=True)
    with m.register_forward_hook(
        lambda mod, args, kwargs, out: order.append(sorted(kwargs)), with_kwargs=True
    ):
        m(plast.ones(1, 2))
    assert order == ["b", "a", []]


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_repr_matches_torch():
    pm, tm = _pair(nn)(), _pair(torch.nn)()
    assert repr(pm) == repr(tm)
    for p_mod, t_mod in [
        (nn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")),
        (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
        (nn.ReLU(inplace=True), torch.nn.ReLU(inplace=True)),
        (nn.Flatten(), torch.nn.Flatten()),
        (nn.Identity(), torch.nn.Identity()),
        (nn.MSELoss(), torch.nn.MSELoss()),
        (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
        (
            nn.ModuleDict({"a": nn.Tanh(), "b": nn.Sigmoid()}),
            torch.nn.ModuleDict({"a": torch.nn.Tanh(), "b": torch.nn.Sigmoid()}),
        ),
        (
            nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)]),
            torch.nn.ModuleList(
                [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2)]
            ),
        ),
        (nn.ModuleList(), torch.nn.ModuleList()),
    ]:
        assert repr(p_mod) == repr(t_mod)


def test_parameter_is_a_tensor():
    p = nn.Parameter(plast.tensor([1.0, 2.0]))
    assert isinstance(p, plast.Tensor) and isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor([1., 2.], requires_grad=True)")
    assert type(p * 2) is plast.Tensor and type(p.detach()) is plast.Tensor
    q = nn.Parameter(plast.zeros(2), requires_grad=False)
    assert not q.requires_grad
    # built from an op's result: a persistent copy that survives transient resets
    r = nn.Parameter(plast.ones(2) * 3)
    plast.reset_transient_arenas()
    assert r.tolist() == [3.0, 3.0]
    # built from a persistent leaf: shares its memory, as torch does
    base = plast.zeros(2)
    s = nn.Parameter(base)
    base.fill_(5.0)
    assert s.tolist() == [5.0, 5.0]
    with pytest.raises(TypeError):
        nn.Parameter([1.0])
    import copy

    c = copy.deepcopy(p)
    assert isinstance(c, nn.Parameter) and c._storage is not p._storage and c.tolist() == p.tolist()


def test_to_dtype_keeps_parameter_objects():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    m.register_buffer("count", plast.tensor([1, 2]))
    m.register_buffer("stat", plast.tensor([0.5]))
    params = list(m.parameters())
    assert m.double() is m
    plast.reset_transient_arenas()
    assert m.stat.dtype == plast.float64 and m.stat.tolist() == [0.5]
    assert list(m.parameters()) == params or all(a is b for a, b in zip(m.parameters(), params))
    assert all(p.dtype == plast.float64 and isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    assert m.count.dtype == plast.int64  # integer buffers keep their dtype
    out = m(plast.ones(2, 2, dtype=plast.float64))
    assert out.dtype == plast.float64
    m.float()
    assert all(p.dtype == plast.float32 for p in params)
    m.to(plast.float64)
    assert m.to("cpu") is m and m.cpu() is m  # moves to CUDA: test_cuda_nn.py
    with pytest.raises(TypeError, match="floating point"):
        m.to(plast.int64)


def test_sequential_api():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and s[0] is layers[0] and s[-1] is layers[2] and list(s) == layers
    sl = s[1:]
    assert isinstance(sl, nn.Sequential) and list(sl._modules) == ["1", "2"]
    s.append(nn.Sigmoid())
    assert len(s) == 4 and list(s._modules) == ["0", "1", "2", "3"]
    del s[1]
    assert list(s._modules) == ["0", "1", "2"] and s[1] is layers[2]
    s[0] = nn.Tanh()
    assert isinstance(s[0], nn.Tanh)
    with pytest.raises(IndexError):
        s[5]
    named = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"] and named.enc is named[0]
    assert named(plast.ones(1, 2)).shape == (1, 2)


def test_module_list_and_dict_api():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    assert len(ml) == 5 and isinstance(ml[-1], nn.Tanh)
    ml.insert(0, nn.Sigmoid())
    assert isinstance(ml[0], nn.Sigmoid) and list(ml._modules) == [str(i) for i in range(6)]
    del ml[0]
    assert len(ml) == 5 and isinstance(ml[0], nn.Linear)
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    assert len(list(ml.parameters())) == 6
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    md["b"] = nn.ReLU()
    md.update([("c", nn.Tanh())])
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert md.pop("b").__class__ is nn.ReLU and list(md.keys()) == ["a", "c"]
    assert list(md.state_dict()) == ["a.weight", "a.bias"]


def test_get_submodule_and_dir():
    m = _pair(nn)()
    assert m.get_submodule("blocks.1.fc") is m.blocks[1].fc
    assert m.get_parameter("head.0.bias") is m.head[0].bias
    assert m.get_buffer("blocks.0.running") is m.blocks[0].running
    with pytest.raises(AttributeError):
        m.get_submodule("blocks.9")
    assert "blocks" in dir(m) and "scale" in dir(m)


def test_parameter_hooks_change_gradients_as_in_torch():
    """A tensor hook on an nn.Parameter runs on every backward (issue 23: it was never called), before the
    gradient is accumulated, and its handle removes it; the optimizer steps on the hooked gradient."""
    rng = np.random.default_rng(2)
    w0, b0 = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    res = {}
    for lib in (plast, torch):
        m = lib.nn.Linear(3, 2)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w0))
            m.bias.copy_(lib.tensor(b0))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        handle = m.weight.register_hook(lambda g, lib=lib: g.clamp(-0.2, 0.2) * 3.0)
        grads = []
        for step in range(6):
            if step == 4:
                handle.remove()
            opt.zero_grad()
            (m(lib.tensor(x)) ** 2).mean().backward()
            grads.append(m.weight.grad.detach().numpy().copy())
            opt.step()
        res[lib] = (np.array(grads), m.weight.detach().numpy())
    np.testing.assert_allclose(res[plast][0], res[torch][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[plast][1], res[torch][1], rtol=1e-5, atol=1e-6)
