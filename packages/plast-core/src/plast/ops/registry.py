"""The op table: one row per op (DESIGN §4).

A row holds everything the engine needs about an op: its name, its kernel for each device, its backward rule
(written in plast ops, returning one gradient per input, None where there is none), and whether fusion may merge
it into a neighbour. Shape and dtype rules run in the op layer (ops/*.py) at the user's call, so errors point at
the user's line.

Kernel contract: ``kernel(node, inputs, outputs)`` where `inputs` are realized Tensors and `outputs` are
Tensors whose storage the engine has allocated (contiguous). A *view* row has ``view=True`` and its kernel
returns ``(storage, strides, offset)`` for its single output instead of writing one.
"""

OPS = {}


class OpDef:
    __slots__ = (
        "name",
        "kernels",
        "backward",
        "fusible",
        "view",
        "n_outputs",
        "saves_inputs",
        "window_kernels",
    )

    def __init__(
        self, name, kernels=None, backward=None, fusible=False, view=False, n_outputs=1, saves_inputs=True
    ):
        self.name = name
        self.kernels = dict(kernels or {})
        self.backward = backward
        self.fusible = fusible
        self.view = view
        self.n_outputs = n_outputs
        # False when backward never reads the inputs' values (add, views, sum): in-place writes to such inputs
        # after the op was recorded are then harmless, and autograd does not flag them.
        self.saves_inputs = saves_inputs
        # Ops whose result is input 0 with a window rewritten (index_put) may also have a kernel per device that
        # writes just the window into input 0's own memory: an in-place op outside any graph (``x[i] = v``, a
        # K/V cache row) then costs the window, not a copy of the whole tensor (engine/inplace.py).
        self.window_kernels = {}

    def __repr__(self):
        devs = ",".join(sorted(self.kernels))
        return f"<op {self.name} [{devs}]{' view' if self.view else ''}{' fusible' if self.fusible else ''}>"


def register(name, *, cpu=None, backward=None, fusible=False, view=False, n_outputs=1, saves_inputs=True):
    if name in OPS:
        raise ValueError(f"op {name!r} is registered twice")
    op = OpDef(name, {"cpu": cpu} if cpu else {}, backward, fusible, view, n_outputs, saves_inputs)
    OPS[name] = op
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
        }
        for op in OPS.values()
    ]
