"""RNN, LSTM, GRU, their cells and packed sequences against torch: torch's state dict loads (strict), outputs,
final states and every parameter's and the input's gradient agree for each configuration."""

import itertools

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn
from plast.nn.utils import rnn as prnn

TOL = dict(rtol=1e-4, atol=1e-5)


def _np(t):
    return t.detach().numpy()


def _close(a, b):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, **TOL)


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _twins(cls_name, *args, **kw):
    tm = getattr(torch.nn, cls_name)(*args, **kw)
    pm = getattr(nn, cls_name)(*args, **kw)
    missing, unexpected = pm.load_state_dict(
        {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}, strict=True
    )
    assert not missing and not unexpected
    assert list(pm.state_dict()) == list(tm.state_dict())
    return pm, tm


def _weights(out_shape, seed=7):
    return np.random.default_rng(seed).uniform(0.5, 1.5, out_shape).astype(np.float32)


def _check_grads(pm, tm, ploss, tloss, pin=None, tin=None):
    ploss.backward()
    tloss.backward()
    tparams = dict(tm.named_parameters())
    names = [n for n, _ in pm.named_parameters()]
    assert names == list(tparams)
    for name, p in pm.named_parameters():
        assert p.grad is not None, name
        _close(p.grad, tparams[name].grad)
    if pin is not None:
        _close(pin.grad, tin.grad)


RNN_CONFIGS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False),
    dict(num_layers=3, batch_first=True, bias=False, bidirectional=True),
]


def _ids(c):
    return ",".join(f"{k}={v}" for k, v in c.items()) or "default"


def _hidden(cls_name, cfg, n, proj=0, seed=3, hidden=6):
    D = 2 if cfg.get("bidirectional") else 1
    L = cfg.get("num_layers", 1)
    h_out = proj or hidden
    h = _randn(L * D, n, h_out, seed=seed) * 0.5
    if cls_name == "LSTM":
        return h, _randn(L * D, n, hidden, seed=seed + 1) * 0.5
    return h


def _pair_state(st, unbatched=False):
    if st is None:
        return None, None
    if isinstance(st, tuple):
        a, b = (_pair_state(s, unbatched) for s in st)
        return (a[0], b[0]), (a[1], b[1])
    if unbatched:
        st = st[:, 0]
    return plast.tensor(st, requires_grad=True), torch.tensor(st, requires_grad=True)


def _state_loss(p_state, t_state):
    if isinstance(t_state, tuple):
        return (p_state[0].sum() + (p_state[1] * 0.5).sum(), t_state[0].sum() + (t_state[1] * 0.5).sum())
    return p_state.sum(), t_state.sum()


CASES = [("RNN", dict(nonlinearity=nl)) for nl in ("tanh", "relu")] + [("LSTM", {}), ("GRU", {})]


@pytest.mark.parametrize("cfg", RNN_CONFIGS, ids=_ids)
@pytest.mark.parametrize("cls_name,extra", CASES, ids=lambda c: c if isinstance(c, str) else _ids(c))
@pytest.mark.parametrize("with_h0", [False, True])
def test_rnn_matches_torch(cls_name, extra, cfg, with_h0):
    pm, tm = _twins(cls_name, 4, 6, **cfg, **extra)
    T, N = 5, 3
    x = _randn(N, T, 4, seed=1) if cfg.get("batch_first") else _randn(T, N, 4, seed=1)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ph, th = _pair_state(_hidden(cls_name, cfg, N) if with_h0 else None)
    pout, pst = pm(px, ph) if with_h0 else pm(px)
    tout, tst = tm(tx, th) if with_h0 else tm(tx)
    _close(pout, tout)
    if cls_name == "LSTM":
        _close(pst[0], tst[0])
        _close(pst[1], tst[1])
    else:
        _close(pst, tst)
    w = _weights(tuple(tout.shape))
    ps, ts = _state_loss(pst, tst)
    _check_grads(pm, tm, (pout * plast.tensor(w)).sum() + ps, (tout * torch.tensor(w)).sum() + ts, px, tx)
    if with_h0:
        for a, b in zip(ph if isinstance(ph, tuple) else (ph,), th if isinstance(th, tuple) else (th,)):
            _close(a.grad, b.grad)


@pytest.mark.parametrize(
    "cfg", [dict(), dict(num_layers=2, bidirectional=True), dict(batch_first=True, num_layers=2)], ids=_ids
)
@pytest.mark.parametrize("with_h0", [False, True])
def test_lstm_proj_size_matches_torch(cfg, with_h0):
    pm, tm = _twins("LSTM", 4, 6, proj_size=3, **cfg)
    assert any(n.startswith("weight_hr_l0") for n, _ in pm.named_parameters())
    x = _randn(5, 2, 4, seed=2)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ph, th = _pair_state(_hidden("LSTM", cfg, 2 if not cfg.get("batch_first") else 5, proj=3))
    if with_h0:
        (pout, pst), (tout, tst) = pm(px, ph), tm(tx, th)
    else:
        (pout, pst), (tout, tst) = pm(px), tm(tx)
    _close(pout, tout)
    _close(pst[0], tst[0])
    _close(pst[1], tst[1])
    ps, ts = _state_loss(pst, tst)
    _check_grads(pm, tm, pout.sum() + ps, tout.sum() + ts, px, tx)


@pytest.mark.parametrize("cls_name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_unbatched_input_matches_torch(cls_name, with_h0):
    cfg = dict(num_layers=2, bidirectional=True)
    pm, tm = _twins(cls_name, 4, 6, **cfg)
    x = _randn(5, 4, seed=4)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ph, th = _pair_state(_hidden(cls_name, cfg, 1) if with_h0 else None, unbatched=True)
    (pout, pst), (tout, tst) = (pm(px, ph), tm(tx, th)) if with_h0 else (pm(px), tm(tx))
    assert tuple(pout.shape) == tuple(tout.shape) == (5, 12)
    _close(pout, tout)
    ps, ts = _state_loss(pst, tst)
    if cls_name == "LSTM":
        _close(pst[0], tst[0])
    else:
        _close(pst, tst)
    _check_grads(pm, tm, pout.sum() + ps, tout.sum() + ts, px, tx)


def _packed_pair(lengths, feat, seed, enforce_sorted):
    seqs = [_randn(n, feat, seed=seed + i) for i, n in enumerate(lengths)]
    pseqs = [plast.tensor(s, requires_grad=True) for s in seqs]
    tseqs = [torch.tensor(s, requires_grad=True) for s in seqs]
    pp = prnn.pack_sequence(pseqs, enforce_sorted=enforce_sorted)
    tp = torch.nn.utils.rnn.pack_sequence(tseqs, enforce_sorted=enforce_sorted)
    return pseqs, tseqs, pp, tp


@pytest.mark.parametrize("cls_name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "cfg",
    [dict(), dict(num_layers=2, bidirectional=True), dict(bidirectional=True, batch_first=True)],
    ids=_ids,
)
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("with_h0", [False, True])
def test_packed_input_matches_torch(cls_name, cfg, enforce_sorted, with_h0):
    pm, tm = _twins(cls_name, 3, 5, **cfg)
    lengths = [6, 4, 4, 1] if enforce_sorted else [2, 6, 1, 4]
    pseqs, tseqs, pp, tp = _packed_pair(lengths, 3, 10, enforce_sorted)
    _close(pp.data, tp.data)
    assert pp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    if not enforce_sorted:
        assert pp.sorted_indices.tolist() == tp.sorted_indices.tolist()
        assert pp.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    ph, th = _pair_state(_hidden(cls_name, cfg, len(lengths), hidden=5) if with_h0 else None)
    (pout, pst), (tout, tst) = (pm(pp, ph), tm(tp, th)) if with_h0 else (pm(pp), tm(tp))
    assert isinstance(pout, prnn.PackedSequence)
    _close(pout.data, tout.data)
    if cls_name == "LSTM":
        _close(pst[0], tst[0])
        _close(pst[1], tst[1])
    else:
        _close(pst, tst)
    bf = cfg.get("batch_first", False)
    ppad, plen = prnn.pad_packed_sequence(pout, batch_first=bf, padding_value=0.5, total_length=7)
    tpad, tlen = torch.nn.utils.rnn.pad_packed_sequence(
        tout, batch_first=bf, padding_value=0.5, total_length=7
    )
    _close(ppad, tpad)
    assert plen.tolist() == tlen.tolist() == lengths
    w = _weights(tuple(tpad.shape))
    ps, ts = _state_loss(pst, tst)
    _check_grads(pm, tm, (ppad * plast.tensor(w)).sum() + ps, (tpad * torch.tensor(w)).sum() + ts)
    for a, b in zip(pseqs, tseqs):
        _close(a.grad, b.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_and_pack_padded_match_torch(batch_first, padding_side):
    lengths = [3, 5, 2]
    seqs = [_randn(n, 2, 3, seed=20 + i) for i, n in enumerate(lengths)]
    pseqs = [plast.tensor(s, requires_grad=True) for s in seqs]
    tseqs = [torch.tensor(s, requires_grad=True) for s in seqs]
    ppad = prnn.pad_sequence(pseqs, batch_first=batch_first, padding_value=-1.0, padding_side=padding_side)
    tpad = torch.nn.utils.rnn.pad_sequence(
        tseqs, batch_first=batch_first, padding_value=-1.0, padding_side=padding_side
    )
    _close(ppad, tpad)
    if padding_side == "right":
        # lengths as a tensor, unsorted: packed data, permutations and the unpacked round trip agree with torch
        pp = prnn.pack_padded_sequence(ppad, plast.tensor(lengths), batch_first, enforce_sorted=False)
        tp = torch.nn.utils.rnn.pack_padded_sequence(
            tpad, torch.tensor(lengths), batch_first, enforce_sorted=False
        )
        _close(pp.data, tp.data)
        assert pp.batch_sizes.tolist() == tp.batch_sizes.tolist()
        assert pp.sorted_indices.tolist() == tp.sorted_indices.tolist()
        w = _weights(tuple(tp.data.shape))
        (pp.data * plast.tensor(w)).sum().backward()
        (tp.data * torch.tensor(w)).sum().backward()
        for a, b in zip(pseqs, tseqs):
            _close(a.grad, b.grad)
        back = prnn.unpack_sequence(pp)
        assert [tuple(s.shape) for s in back] == [s.shape for s in seqs]
        for a, b in zip(back, seqs):
            np.testing.assert_array_equal(a.detach().numpy(), b)
        unp = prnn.unpad_sequence(ppad, lengths, batch_first=batch_first)
        for a, b in zip(unp, seqs):
            np.testing.assert_array_equal(a.detach().numpy(), b)


def test_packing_errors():
    x = plast.zeros(4, 3)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        prnn.pack_padded_sequence(x, [1, 3, 2])
    with pytest.raises(ValueError, match="expected 3 lengths"):
        prnn.pack_padded_sequence(x, [2, 1])
    with pytest.raises(RuntimeError, match="exceeds"):
        prnn.pack_padded_sequence(x, [5, 1, 1])
    p = prnn.pack_sequence([plast.ones(3), plast.ones(2)])
    with pytest.raises(ValueError, match="total_length"):
        prnn.pad_packed_sequence(p, total_length=2)


@pytest.mark.parametrize("cls_name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_h", [False, True])
def test_cells_match_torch(cls_name, bias, batched, with_h):
    kw = dict(nonlinearity="relu") if cls_name == "RNNCell" and bias else {}
    pm, tm = _twins(cls_name, 4, 5, bias=bias, **kw)
    shape = (3, 4) if batched else (4,)
    hshape = (3, 5) if batched else (5,)
    x = _randn(*shape, seed=5)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    args_p, args_t = [px], [tx]
    if with_h:
        h = _randn(*hshape, seed=6)
        if cls_name == "LSTMCell":
            c = _randn(*hshape, seed=7)
            args_p.append((plast.tensor(h), plast.tensor(c)))
            args_t.append((torch.tensor(h), torch.tensor(c)))
        else:
            args_p.append(plast.tensor(h))
            args_t.append(torch.tensor(h))
    pout, tout = pm(*args_p), tm(*args_t)
    if cls_name == "LSTMCell":
        _close(pout[0], tout[0])
        _close(pout[1], tout[1])
        ploss, tloss = pout[0].sum() + (pout[1] * 2).sum(), tout[0].sum() + (tout[1] * 2).sum()
    else:
        _close(pout, tout)
        ploss, tloss = pout.sum(), tout.sum()
    _check_grads(pm, tm, ploss, tloss, px, tx)


def test_cell_loop_equals_module():
    # an LSTMCell stepped in Python over time equals a one-layer LSTM with the same weights
    lstm, cell = nn.LSTM(3, 4), nn.LSTMCell(3, 4)
    cell.load_state_dict({k[:-3]: v for k, v in lstm.state_dict().items()})
    x = plast.tensor(_randn(6, 2, 3, seed=8))
    out, (h, c) = lstm(x)
    hc = None
    for t in range(6):
        hc = cell(x[t], hc)
        np.testing.assert_allclose(hc[0].detach().numpy(), out[t].detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(hc[1].detach().numpy(), c[0].detach().numpy(), rtol=1e-6, atol=1e-6)


def test_dropout_between_layers_training_only():
    pm, tm = _twins("GRU", 3, 4, num_layers=2, dropout=1.0)
    x = _randn(5, 2, 3, seed=9)
    # p=1 zeroes the first layer's output in training, so the second layer sees only zeros: as torch
    pout, _ = pm(plast.tensor(x))
    tout, _ = tm(torch.tensor(x))
    _close(pout, tout)
    pm.eval()
    tm.eval()
    pe, _ = pm(plast.tensor(x))
    te, _ = tm(torch.tensor(x))
    _close(pe, te)
    assert not np.allclose(pe.detach().numpy(), pout.detach().numpy())
    pm2 = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    a, _ = pm2(plast.tensor(x))
    pm2.eval()
    b, _ = pm2(plast.tensor(x))
    c, _ = pm2(plast.tensor(x))
    np.testing.assert_array_equal(b.detach().numpy(), c.detach().numpy())
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())


def test_init_distribution_and_names():
    m = nn.LSTM(5, 16, num_layers=2, bidirectional=True)
    t = torch.nn.LSTM(5, 16, num_layers=2, bidirectional=True)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in t.named_parameters()
    ]
    vals = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    bound = 1 / 4
    assert vals.min() >= -bound and vals.max() <= bound and vals.std() > bound / 2
    assert repr(m) == repr(t)
    assert repr(nn.RNN(3, 4, 2, "relu", batch_first=True)) == repr(
        torch.nn.RNN(3, 4, 2, "relu", batch_first=True)
    )
    assert len(m.all_weights) == 4 and m._flat_weights_names == t._flat_weights_names
    m.flatten_parameters()


def test_bad_arguments_and_inputs():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.LSTM(3, 4, dropout=1.5)
    m = nn.GRU(3, 4)
    with pytest.raises(ValueError, match="input_size"):
        m(plast.zeros(5, 2, 2))
    with pytest.raises(ValueError, match=r"hx of shape \(1, 2, 4\)"):
        m(plast.zeros(5, 2, 3), plast.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="2-D"):
        m(plast.zeros(5, 3), plast.zeros(1, 2, 4))
    with pytest.raises(TypeError, match="tuple"):
        nn.LSTM(3, 4)(plast.zeros(5, 2, 3), plast.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="hidden state"):
        nn.RNNCell(3, 4)(plast.zeros(2, 3), plast.zeros(3, 4))


@pytest.mark.parametrize("cls_name,dims", list(itertools.product(["LSTM", "GRU"], [(3, 4)])))
def test_float64_and_optimizer_step(cls_name, dims):
    # float64 weights run in float64; a few SGD steps on both sides stay equal
    pm, tm = _twins(cls_name, *dims, num_layers=2)
    pm.double()
    tm.double()
    popt = plast.optim.SGD(pm.parameters(), lr=0.1)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    x = _randn(4, 2, 3, seed=11).astype(np.float64)
    for _ in range(3):
        popt.zero_grad()
        topt.zero_grad()
        pout, _ = pm(plast.tensor(x))
        tout, _ = tm(torch.tensor(x))
        assert pout.dtype == plast.float64
        (pout**2).mean().backward()
        (tout**2).mean().backward()
        popt.step()
        topt.step()
    for p, t in zip(pm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


class _TorchLM(torch.nn.Module):
    # the shape of pytorch/examples' word-level language model: embedding, dropout, RNN, dropout, decoder
    def __init__(self, kind, ntoken=20, ninp=8, nhid=12, nlayers=2):
        super().__init__()
        self.encoder = torch.nn.Embedding(ntoken, ninp)
        self.drop = torch.nn.Dropout(0.0)
        self.rnn = getattr(torch.nn, kind)(ninp, nhid, nlayers, dropout=0.0)
        self.decoder = torch.nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


class _PlastLM(nn.Module):
    def __init__(self, kind, ntoken=20, ninp=8, nhid=12, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.drop = nn.Dropout(0.0)
        self.rnn = getattr(nn, kind)(ninp, nhid, nlayers, dropout=0.0)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


def _detach(h):
    return tuple(v.detach() for v in h) if isinstance(h, tuple) else h.detach()


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_language_model_20_steps_matches_torch(kind):
    # truncated BPTT with the hidden state carried (detached) between batches, gradient clipping and SGD
    torch.manual_seed(0)
    tm, pm = _TorchLM(kind), _PlastLM(kind)
    pm.load_state_dict({k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}, strict=True)
    topt, popt = torch.optim.SGD(tm.parameters(), lr=0.5), plast.optim.SGD(pm.parameters(), lr=0.5)
    data = np.random.default_rng(0).integers(0, 20, size=(20 * 6 + 1, 3))
    th = ph = None
    for i in range(20):
        x, y = data[i * 6 : i * 6 + 6], data[i * 6 + 1 : i * 6 + 7]
        tout, th = tm(torch.tensor(x), th)
        pout, ph = pm(plast.tensor(x), ph)
        tl = torch.nn.functional.cross_entropy(tout.reshape(-1, 20), torch.tensor(y).reshape(-1))
        pl = plast.cross_entropy(pout.reshape(-1, 20), plast.tensor(y).reshape(-1))
        np.testing.assert_allclose(pl.item(), tl.item(), rtol=1e-5)
        topt.zero_grad()
        popt.zero_grad()
        tl.backward()
        pl.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.25)
        nn.utils.clip_grad_norm_(pm.parameters(), 0.25)
        topt.step()
        popt.step()
        th, ph = _detach(th), _detach(ph)


@pytest.mark.parametrize("cls_name", ["LSTM", "GRU"])
def test_jitted_training_equals_eager(cls_name):
    def train(jit):
        plast.manual_seed(0)
        m = getattr(nn, cls_name)(4, 6, num_layers=2, bidirectional=True)
        head = nn.Linear(12, 3)
        opt = plast.optim.SGD(list(m.parameters()) + list(head.parameters()), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            out, _ = m(x)
            loss = plast.cross_entropy(head(out).reshape(-1, 3), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        f = plast.jit(step) if jit else step
        rng = np.random.default_rng(0)
        x = plast.tensor(rng.standard_normal((5, 2, 4)).astype(np.float32))
        y = plast.tensor(rng.integers(0, 3, (5, 2)))
        return [f(x, y).item() for _ in range(4)]

    np.testing.assert_allclose(train(True), train(False), rtol=1e-6)
