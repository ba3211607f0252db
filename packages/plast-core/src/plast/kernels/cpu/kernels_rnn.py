"""CPU kernels of the fused LSTM / GRU cell rows (ops/rnn.py): tensors laid out as the row-strided matrices of
_rnn_cell.pyx (csrc/rnn_cell.c)."""

import numpy as np

from . import _rnn_cell
from .kernels import address, np_view


def _rows(t):
    """(address, row stride, keep-alive) of a 2-d float tensor as rows of contiguous elements: its own memory
    when its rows are (a split or narrow of a wider matrix, the usual case), else a contiguous copy."""
    n, m = t._shape
    s0, s1 = t._strides
    if m <= 1 or s1 == 1:
        if n <= 1:
            return address(t), m, None
        if s0 >= m:
            return address(t), s0, None
    a = np.ascontiguousarray(np_view(t))
    return a.ctypes.data, m, a


def lstm_cell(node, inputs, outputs):
    gx, gh, c0 = (_rows(t) for t in inputs)
    h, c = outputs
    n, hsz = h._shape
    _rnn_cell.lstm_cell(
        n, hsz, gx[0], gx[1], gh[0], gh[1], c0[0], c0[1], address(h), address(c), h.dtype.code
    )


def lstm_cell_backward(node, inputs, outputs):
    has_dh, has_dc = node.args
    gx, gh, c0 = (_rows(t) for t in inputs[:3])
    rest = iter(inputs[3:])
    dh = _rows(next(rest)) if has_dh else (0, 0, None)
    dc = _rows(next(rest)) if has_dc else (0, 0, None)
    dg, dc0 = outputs
    n, hsz = dc0._shape
    _rnn_cell.lstm_cell_bw(
        n, hsz, gx[0], gx[1], gh[0], gh[1], c0[0], c0[1], dh[0], dh[1], dc[0], dc[1], address(dg), address(dc0),
        dc0.dtype.code,
    )  # fmt: skip


def gru_cell(node, inputs, outputs):
    gx, gh, h0 = (_rows(t) for t in inputs)
    (h,) = outputs
    n, hsz = h._shape
    _rnn_cell.gru_cell(n, hsz, gx[0], gx[1], gh[0], gh[1], h0[0], h0[1], address(h), h.dtype.code)


def gru_cell_backward(node, inputs, outputs):
    gx, gh, h0, dh = (_rows(t) for t in inputs)
    dgx, dgh, dh0 = outputs
    n, hsz = dh0._shape
    _rnn_cell.gru_cell_bw(
        n, hsz, gx[0], gx[1], gh[0], gh[1], h0[0], h0[1], dh[0], dh[1], address(dgx), address(dgh), address(dh0),
        dh0.dtype.code,
    )  # fmt: skip
