"""CUDA launchers of the fused LSTM / GRU cell rows (ops/rnn.py), cu/rnn_cell.cu: the CPU kernels' contract
(kernels/cpu/kernels_rnn.py) with strided operands copied to contiguous ones first."""

from .abi import Params
from .kernels import BLOCK, F32, F64, SUF, addr, contiguous, grid1, launch, operand


def _code(t, what):
    code = t.dtype.code
    if code not in (F32, F64):
        raise NotImplementedError(f"CUDA {what} runs on float32/float64 tensors, got dtype code {code}")
    return code


def _ins(inputs, code):
    return [contiguous(operand(t), code) for t in inputs]


def lstm_cell(node, inputs, outputs):
    h, c = outputs
    code = _code(h, "fused_lstm_cell")
    gx, gh, c0 = _ins(inputs, code)
    n, hsz = h._shape
    if n * hsz == 0:
        return
    p = Params().ptr(gx.addr).ptr(gh.addr).ptr(c0.addr).ptr(addr(h)).ptr(addr(c)).i64(n).i64(hsz)
    launch("rnn_cell", f"lstm_cell_fwd_{SUF[code]}", grid1(n * hsz), (BLOCK,), p)


def lstm_cell_backward(node, inputs, outputs):
    has_dh, has_dc = node.args
    dg, dc0 = outputs
    code = _code(dc0, "fused_lstm_cell backward")
    ins = _ins(inputs, code)
    gx, gh, c0 = ins[:3]
    rest = iter(ins[3:])
    dh = next(rest).addr if has_dh else 0
    dc = next(rest).addr if has_dc else 0
    n, hsz = dc0._shape
    if n * hsz == 0:
        return
    p = Params().ptr(gx.addr).ptr(gh.addr).ptr(c0.addr).ptr(dh).ptr(dc).ptr(addr(dg)).ptr(addr(dc0))
    p.i64(n).i64(hsz)
    launch("rnn_cell", f"lstm_cell_bwd_{SUF[code]}", grid1(n * hsz), (BLOCK,), p)


def gru_cell(node, inputs, outputs):
    (h,) = outputs
    code = _code(h, "fused_gru_cell")
    gx, gh, h0 = _ins(inputs, code)
    n, hsz = h._shape
    if n * hsz == 0:
        return
    p = Params().ptr(gx.addr).ptr(gh.addr).ptr(h0.addr).ptr(addr(h)).i64(n).i64(hsz)
    launch("rnn_cell", f"gru_cell_fwd_{SUF[code]}", grid1(n * hsz), (BLOCK,), p)


def gru_cell_backward(node, inputs, outputs):
    dgx, dgh, dh0 = outputs
    code = _code(dh0, "fused_gru_cell backward")
    gx, gh, h0, dh = _ins(inputs, code)
    n, hsz = dh0._shape
    if n * hsz == 0:
        return
    p = (
        Params()
        .ptr(gx.addr)
        .ptr(gh.addr)
        .ptr(h0.addr)
        .ptr(dh.addr)
        .ptr(addr(dgx))
        .ptr(addr(dgh))
        .ptr(addr(dh0))
    )
    p.i64(n).i64(hsz)
    launch("rnn_cell", f"gru_cell_bwd_{SUF[code]}", grid1(n * hsz), (BLOCK,), p)


RNN = {
    "fused_lstm_cell": lstm_cell,
    "fused_lstm_cell_backward": lstm_cell_backward,
    "fused_gru_cell": gru_cell,
    "fused_gru_cell_backward": gru_cell_backward,
}
