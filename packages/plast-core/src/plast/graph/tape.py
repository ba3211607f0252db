"""The tape: what ``@plast.jit`` records while it traces (DESIGN §2.5), and the hooks the engine calls to write
to it.

While a trace runs, ``_tape`` is its Tape, and every kernel the engine runs is noted here: op kernels
(graph/realize.py, graph/_scheduler.pyx), in-place copies (graph/inplace.py), fused updates (graph/_mutation.pyx),
gradient write-backs (autograd) and random fills (plast.random, plast.creation). The tape lives in the graph layer
so that the layers that run kernels can write to it without importing the tracer above them (plast._jit.trace,
which starts and ends a trace and turns its tape into a plan).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable

from ..kernels.cpu.kernels import copy as cpu_copy
from ..kernels.cpu.kernels import np_view
from ..kernels.host import copy_values, host_array, write_host

_tape = None  # the Tape being recorded, or None
_host_side = 0  # >0 while runtime_input callbacks run: their writes are not part of the plan


def tracing() -> bool:
    """True while a @plast.jit function is being traced."""
    return _tape is not None


class Step:
    """One kernel call of a plan: ``kernel(node, inputs, outputs)`` with tensors bound to plan memory. `kind` is
    "kernel", "copy", "random" (a fill that draws again on replay) or "mutation" (writes its inputs)."""

    __slots__ = ("kernel", "node", "inputs", "outputs", "what", "kind")

    def __init__(self, kernel, node, inputs, outputs, what, kind="kernel"):
        self.kernel = kernel
        self.node = node
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.what = what
        self.kind = kind

    def __repr__(self):
        return f"<Step {self.what}>"


class Tape:
    def __init__(self):
        self.steps = []
        self.created = {}  # id(storage) -> storage, for storages allocated by kernels while tracing
        self.runtime_inputs = []
        self.states = []  # (weakref(obj), keyfn, key)

    def kernel(self, kernel, node, inputs, outputs, what, kind="kernel"):
        self.steps.append(Step(kernel, node, inputs, outputs, what, kind))


# ---- hooks the engine calls -------------------------------------------------------------------------------


def note_kernel(kernel, node, inputs, outputs):
    """graph/realize.py ran an op kernel."""
    if _tape is not None and not _host_side:
        for o in outputs:
            _tape.created[id(o._storage)] = o._storage
        _tape.kernel(kernel, node, inputs, outputs, node.op.name)


def note_copy(dst, src, what="copy"):
    """A value was copied into dst's memory outside an op kernel (in-place writes, gradient write-back)."""
    if _tape is not None and not _host_side:
        if dst.device.type == "cpu" and src.device.type == "cpu":
            copy = cpu_copy  # the compiled replay runs it with no Python call
        else:
            copy = device_copy
        _tape.kernel(copy, None, [src], [dst], what, "copy")


def device_copy(node, inputs, outputs):
    """``outputs[0][...] = inputs[0]`` for one shape on any devices: the replayed form of a copy into memory
    that is not CPU memory (on the GPU, a device-side copy or copy kernel; across devices, a transfer)."""
    src, dst = inputs[0], outputs[0]
    if dst.device == src.device:
        copy_values(dst, src)
    elif dst.device.type == "cpu":
        if dst.numel():
            np_view(dst)[...] = host_array(src)
    else:
        write_host(dst, host_array(src))


def note_mutation(node):
    """A fused in-place kernel (optimizer update) ran on node.inputs."""
    if _tape is not None and not _host_side:
        node.reruns = True  # a plan step: its kernel may keep what it packs (node.scratch)
        kernel = node.op.kernels[node.inputs[0].device.type]
        _tape.kernel(kernel, node, node.inputs, [], node.op.name, "mutation")


def note_random(fill_fn, t, what):
    """t was filled with random numbers by fill_fn(t) (on t's device); a replay draws again, from the
    generator's offset then."""
    if _tape is not None and not _host_side:
        _tape.created[id(t._storage)] = t._storage
        _tape.kernel(lambda node, inputs, outputs: fill_fn(outputs[0]), None, [], [t], what, "random")


def note_state(obj: object, keyfn: Callable[[], Hashable]) -> None:
    """Record keyfn() of obj; a later call whose keyfn() differs traces again (modules: training flag and
    parameters)."""
    if _tape is not None:
        _tape.states.append((weakref.ref(obj), keyfn, keyfn()))


def runtime_input(fn: Callable[[], object]) -> None:
    """Call fn now and before every replay of the plan being traced. What fn writes (e.g. an optimizer copying
    the current learning rate into its hyperparameter tensor) is a runtime input, not part of the plan."""
    global _host_side
    if _tape is not None:
        _tape.runtime_inputs.append(fn)
    _host_side += 1
    try:
        fn()
    finally:
        _host_side -= 1
