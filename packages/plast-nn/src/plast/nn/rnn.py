"""Recurrent layers with torch.nn's signatures, parameter names, init and return values: RNN, LSTM, GRU and
RNNCell, LSTMCell, GRUCell.

The LSTM and GRU cells' pointwise math is one fused op per step and direction (``plast.fused_lstm_cell`` /
``fused_gru_cell``: one kernel forward, one backward) on the CPU, and plast ops (sigmoid, tanh, chunk) on
CUDA; time steps loop in Python. Each layer and direction projects the whole input sequence with one
matmul (``x @ weight_ih.T + bias_ih`` over every time step) and then runs the recurrence, one
``h @ weight_hh.T`` per step. Padded and packed inputs take one path: a padded batch is a packed one whose batch
size never shrinks. Gradients come from autograd.

``flatten_parameters()`` is accepted and does nothing (plast has no cuDNN weight buffer to compact).
"""

import math
import numbers
import warnings

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

# ---- cells: one time step on (N, *) rows; gx is the input projection x @ weight_ih.T + bias_ih ----


def _rnn_step(gx, h, w_hh, b_hh, relu):
    pre = gx + F.linear(h, w_hh, b_hh)
    return plast.relu(pre) if relu else plast.tanh(pre)


def _fused(gx):
    # NOTE: the fused cells' CUDA kernels are compile- and launch-signature-checked only (no GPU has run them
    # yet: plast-core's test_cuda.py replays them against the CPU's, segment "rnn"); until one has, CUDA layers
    # keep the cell in sigmoid/tanh/mul/add ops
    return gx.device.type == "cpu"


def _lstm_step(gx, h, c, w_hh, b_hh, w_hr):
    # gates in torch's order: input, forget, cell, output
    gh = F.linear(h, w_hh, b_hh)
    if _fused(gx):
        h, c = plast.fused_lstm_cell(gx, gh, c)
    else:
        i, f, g, o = (gx + gh).chunk(4, 1)
        c = plast.sigmoid(f) * c + plast.sigmoid(i) * plast.tanh(g)
        h = plast.sigmoid(o) * plast.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gx, h, w_hh, b_hh):
    # gates in torch's order: reset, update, new; the reset gate scales the hidden part of n, bias included
    gh = F.linear(h, w_hh, b_hh)
    if _fused(gx):
        return plast.fused_gru_cell(gx, gh, h)
    xr, xz, xn = gx.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r = plast.sigmoid(xr + hr)
    z = plast.sigmoid(xz + hz)
    n = plast.tanh(xn + r * hn)
    return n + z * (h - n)


_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RNNBase(Module):
    """What RNN, LSTM and GRU share: torch's parameters (``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``,
    ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` with an LSTM's proj_size), in torch's order, each
    initialised ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), and the forward loop over layers, directions
    and time steps."""

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being "
                f"zeroed, got {dropout!r}"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int) or input_size <= 0:
            raise ValueError(f"input_size must be a positive int, got {input_size!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive int, got {num_layers!r}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError(
                f"proj_size has to be smaller than hidden_size, got proj_size={proj_size}, "
                f"hidden_size={hidden_size}"
            )
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode!r}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    name = f"{base}_l{layer}{suffix}"
                    self.register_parameter(name, Parameter(plast.empty(shape, dtype=dt)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self):
        """Accepted for torch compatibility; does nothing (there is no cuDNN weight buffer to compact)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, as torch's ``all_weights``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- forward ----
    def _layer_weights(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        return tuple(
            getattr(self, f"{base}_l{layer}{suffix}", None)
            for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        )

    def _run_direction(self, x, sizes, starts, h, c, weights, reverse):
        """One layer in one direction over packed rows ``x`` (sum(sizes), features): (output rows, h_n, c_n).
        ``h``/``c`` hold all B sequences (longest first); at step t only the first sizes[t] are running, and
        the rest keep their state, so each ends holding its own last (or, reversed, first) step."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        # NOTE: split_copy, one node whose backward is one concatenation: the pieces of a split (views) would
        # each scatter their gradient into a zero tensor the size of the whole sequence, T times (with the sum
        # of those, half of an LSTM's training step at T=35)
        gxs = plast.split_copy(F.linear(x, w_ih, b_ih), sizes, dim=0)
        B = h.shape[0]
        T = len(sizes)
        outs = [None] * T
        relu = self.mode == "RNN_RELU"
        for t in range(T - 1, -1, -1) if reverse else range(T):
            bs = sizes[t]
            gx = gxs[t]
            hp = h if bs == B else h[:bs]
            if self.mode == "LSTM":
                cp = c if bs == B else c[:bs]
                ht, ct = _lstm_step(gx, hp, cp, w_hh, b_hh, w_hr)
                c = ct if bs == B else plast.cat([ct, c[bs:]], dim=0)
            elif self.mode == "GRU":
                ht = _gru_step(gx, hp, w_hh, b_hh)
            else:
                ht = _rnn_step(gx, hp, w_hh, b_hh, relu)
            outs[t] = ht
            h = ht if bs == B else plast.cat([ht, h[bs:]], dim=0)
        return plast.cat(outs, dim=0) if T > 1 else outs[0], h, c

    def _check_hidden(self, hx, expected, what):
        if tuple(hx.shape) != expected:
            raise ShapeError(f"{self!r}: expected {what} of shape {expected}, got {tuple(hx.shape)}")

    def forward(self, input, hx=None):
        """(output, h_n) for RNN and GRU, (output, (h_n, c_n)) for LSTM, as torch: input (L, N, H_in)
        ((N, L, H_in) with batch_first, (L, H_in) unbatched, or a PackedSequence); h_0 (and c_0) of shape
        (D * num_layers, N, H_out), zeros when not given."""
        is_lstm = self.mode == "LSTM"
        D = 2 if self.bidirectional else 1
        h_out = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        sorted_indices = unsorted_indices = None
        if packed:
            data, batch_sizes = input.data, input.batch_sizes
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            sizes = [int(v) for v in batch_sizes.tolist()]
            B = sizes[0]
            batched = True
            if data.ndim != 2 or data.shape[-1] != self.input_size:
                raise ShapeError(
                    f"{self!r}: expected packed data of shape (*, {self.input_size}), got {tuple(data.shape)}"
                )
        else:
            if input.ndim not in (2, 3):
                raise ShapeError(
                    f"{self!r}: expected input of shape (L, N, {self.input_size}), (N, L, {self.input_size}) "
                    f"with batch_first, or (L, {self.input_size}) unbatched; got {tuple(input.shape)}"
                )
            if input.shape[-1] != self.input_size:
                raise ShapeError(
                    f"{self!r}: input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                    f"{input.shape[-1]}"
                )
            batched = input.ndim == 3
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
            T, B = x.shape[0], x.shape[1]
            sizes = [B] * T
            data = x.reshape(T * B, self.input_size)

        # initial states, in the sorted (longest-first) batch order the loop runs in
        def prepare(state, size, what):
            if state is None:
                return plast.zeros(self.num_layers * D, B, size, dtype=data.dtype, device=data.device)
            if not batched:
                if state.ndim != 2:
                    raise ShapeError(
                        f"{self!r}: for unbatched 2-D input, {what} should also be 2-D but got "
                        f"{state.ndim}-D tensor"
                    )
                state = state.unsqueeze(1)
            elif state.ndim != 3:
                raise ShapeError(
                    f"{self!r}: for batched 3-D input, {what} should also be 3-D but got {state.ndim}-D tensor"
                )
            self._check_hidden(state, (self.num_layers * D, B, size), what)
            if sorted_indices is not None:
                state = state.index_select(1, sorted_indices)
            return state

        if is_lstm:
            if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise TypeError(
                    f"{self!r}: hx must be a tuple (h_0, c_0) for an LSTM, got {type(hx).__name__}"
                )
            h0 = prepare(None if hx is None else hx[0], h_out, "h_0")
            c0 = prepare(None if hx is None else hx[1], self.hidden_size, "c_0")
        else:
            if hx is not None and not isinstance(hx, plast.Tensor):
                raise TypeError(f"{self!r}: hx must be a Tensor, got {type(hx).__name__}")
            h0 = prepare(hx, h_out, "hx")
            c0 = None

        starts, off = [], 0
        for bs in sizes:
            starts.append(off)
            off += bs
        h_n, c_n = [], []
        layer_in = data
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                out, h, c = self._run_direction(
                    layer_in,
                    sizes,
                    starts,
                    h0[k],
                    None if c0 is None else c0[k],
                    self._layer_weights(layer, d),
                    reverse=d == 1,
                )
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_in = outs[0] if D == 1 else plast.cat(outs, dim=1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)

        h_n = plast.stack(h_n, dim=0)
        c_n = plast.stack(c_n, dim=0) if is_lstm else None
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            if is_lstm:
                c_n = c_n.index_select(1, unsorted_indices)
        if packed:
            output = PackedSequence(layer_in, input.batch_sizes, sorted_indices, unsorted_indices)
        else:
            output = layer_in.reshape(T, B, D * h_out)
            if not batched:
                output = output.squeeze(1)
                h_n = h_n.squeeze(1)
                c_n = None if c_n is None else c_n.squeeze(1)
            elif self.batch_first:
                output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)


class RNN(RNNBase):
    """Elman RNN (torch.nn.RNN): ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu), over
    ``num_layers`` layers (dropout between them while training), one or two directions.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False, device=None, dtype=None)``, as torch (nonlinearity is the 4th positional).

    >>> rnn = plast.nn.RNN(4, 8, num_layers=2)
    >>> out, h_n = rnn(plast.randn(5, 3, 4))
    >>> out.shape, h_n.shape
    (plast.Size([5, 3, 8]), plast.Size([2, 3, 8]))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory (torch.nn.LSTM): gates i, f, g, o; ``c_t = f * c_{t-1} + i * g``,
    ``h_t = o * tanh(c_t)`` (times ``weight_hr`` with ``proj_size > 0``). Returns ``(output, (h_n, c_n))``.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)``.

    >>> lstm = plast.nn.LSTM(4, 8, batch_first=True)
    >>> out, (h_n, c_n) = lstm(plast.randn(3, 5, 4))
    >>> out.shape, h_n.shape, c_n.shape
    (plast.Size([3, 5, 8]), plast.Size([1, 3, 8]), plast.Size([1, 3, 8]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (torch.nn.GRU): gates r, z, n; ``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``,
    ``h_t = (1 - z) * n + z * h_{t-1}``.

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``.

    >>> out, h_n = plast.nn.GRU(4, 8, bidirectional=True)(plast.randn(5, 3, 4))
    >>> out.shape, h_n.shape
    (plast.Size([5, 3, 16]), plast.Size([2, 3, 8]))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (G*hidden, input_size), ``weight_hh`` (G*hidden, hidden_size),
    ``bias_ih``, ``bias_hh``, all ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), and input/hidden checks
    for batched (N, H_in) and unbatched (H_in,) inputs."""

    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, num_chunks=None, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        g = (num_chunks or self._gates) * hidden_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(plast.empty(g, input_size, dtype=dt))
        self.weight_hh = Parameter(plast.empty(g, hidden_size, dtype=dt))
        if bias:
            self.bias_ih = Parameter(plast.empty(g, dtype=dt))
            self.bias_hh = Parameter(plast.empty(g, dtype=dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _prepare(self, input, states):
        """(input as (N, H_in), states as (N, hidden) or zeros, batched?)"""
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{self!r}: expected input of shape (N, {self.input_size}) or ({self.input_size},), got "
                f"{tuple(input.shape)}"
            )
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        out = []
        for s in states:
            if s is None:
                s = plast.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            else:
                if s.ndim != input.ndim:
                    raise ShapeError(
                        f"{self!r}: {input.ndim}-D input needs a {input.ndim}-D hidden state, got shape "
                        f"{tuple(s.shape)}"
                    )
                s = s if batched else s.unsqueeze(0)
                if tuple(s.shape) != (x.shape[0], self.hidden_size):
                    raise ShapeError(
                        f"{self!r}: expected a hidden state of shape {(x.shape[0], self.hidden_size)} for an "
                        f"input of shape {tuple(input.shape)}, got {tuple(s.shape)}"
                    )
            out.append(s)
        return x, out, batched


class RNNCell(RNNCellBase):
    """One Elman RNN step (torch.nn.RNNCell): ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    >>> cell = plast.nn.RNNCell(4, 8)
    >>> cell(plast.randn(3, 4)).shape
    plast.Size([3, 8])
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, [hx])
        gx = F.linear(x, self.weight_ih, self.bias_ih)
        h = _rnn_step(gx, h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (torch.nn.LSTMCell): returns ``(h', c')``; ``hx`` is ``(h, c)`` or None (zeros).

    >>> h, c = plast.nn.LSTMCell(4, 8)(plast.randn(3, 4))
    >>> h.shape, c.shape
    (plast.Size([3, 8]), plast.Size([3, 8]))
    """

    _gates = 4

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{self!r}: hx must be a tuple (h, c), got {type(hx).__name__}")
        x, (h, c), batched = self._prepare(input, [None, None] if hx is None else list(hx))
        gx = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = _lstm_step(gx, h, c, self.weight_hh, self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (torch.nn.GRUCell).

    >>> plast.nn.GRUCell(4, 8)(plast.randn(4)).shape
    plast.Size([8])
    """

    _gates = 3

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, [hx])
        gx = F.linear(x, self.weight_ih, self.bias_ih)
        h = _gru_step(gx, h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
