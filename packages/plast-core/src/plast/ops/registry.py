"""The op table: one row per op (DESIGN §4).

A row holds everything the engine needs about an op: its name, its kernel for each device, its backward rule
(written in plast ops, returning one gradient per input, None where there is none), and whether fusion may merge
it into a neighbour. Shape and dtype rules run in the op layer (ops/*.py) at the user's call, so errors point at
the user's line.

Kernel contract: ``kernel(node, inputs, outputs)`` where `inputs` are realized Tensors and `outputs` are
Tensors whose storage the engine has allocated (contiguous). A *view* row has ``view=True`` and its kernel
returns ``(storage, strides, offset)`` for its single output instead of writing one.
"""

from .._core._structs import OpDef
from ..kernels.cpu._fused import BINARY as CHAIN_BINARY
from ..kernels.cpu._fused import UNARY as CHAIN_UNARY

OPS = {}


# OpDef is a C struct (graph/_graph.pyx): recording, scheduling and backward read its fields for every node.
# Fields: name; kernels {device type: kernel}; backward (the rule, or None); chain (the row's opcode in the
# elementwise-chain bytecode, kernels/cpu/_fused.pyx, when chain fusion may merge it with its neighbours: the
# row is then ``fusible``); reads_output (its backward reads its own output, so a chain that needs grad never
# swallows that output); view; n_outputs;
# saves_inputs (False when backward never reads the inputs' values: in-place writes to such inputs after the op
# was recorded are then harmless, and autograd does not flag them); window_kernels {device type: kernel} for ops
# whose result is input 0 with a window rewritten (index_put): an in-place op outside any graph (``x[i] = v``,
# a K/V cache row) then costs the window, not a copy of the whole tensor (graph/inplace.py); half (its kernels
# take bfloat16 and float16 tensors: views always do; a row without it computes in float32, the recorder
# widening its 16-bit inputs and rounding its 16-bit outputs once, graph/_graph.pyx).


def register(
    name,
    *,
    cpu=None,
    backward=None,
    chain=None,
    view=False,
    n_outputs=1,
    saves_inputs=True,
    reads_output=False,
    half=False,
):
    if name in OPS:
        raise ValueError(f"op {name!r} is registered twice")
    if chain is not None and chain not in CHAIN_BINARY and chain not in CHAIN_UNARY:
        raise ValueError(f"op {name!r}: {chain!r} is no opcode of the elementwise-chain bytecode")
    op = OpDef(
        name, {"cpu": cpu} if cpu else {}, backward, chain, view, n_outputs, saves_inputs, reads_output, half
    )
    OPS[name] = op
    return op


def register_cuda_kernels():
    """Put the CUDA kernels into the op table's "cuda" column (ops/device.py does, for the first CUDA tensor);
    ops missing there get a NotImplementedError stub. Returns (implemented, stubbed) op-name lists. Idempotent."""
    from ..kernels.cuda.table import not_implemented, table  # the CUDA backend: loaded on first CUDA use only

    t = table()
    implemented, stubbed = [], []
    for name, op in OPS.items():
        k = t.get(name) or not_implemented(name)
        op.kernels["cuda"] = k
        (stubbed if getattr(k, "cuda_stub", False) else implemented).append(name)
    return implemented, stubbed


def adopt(op):
    """Enter a row built below the op layer (the recorder's ``cast``, graph/_graph.pyx) into the table."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def table():
    """Rows of the op table as dicts (for docs and the closing notes)."""
    return [
        {
            "op": op.name,
            "devices": sorted(op.kernels),
            "backward": op.backward is not None,
            "fusible": op.fusible,
            "view": op.view,
            "half": op.half,
        }
        for op in OPS.values()
    ]
