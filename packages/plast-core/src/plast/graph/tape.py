"""The tape: the one recording of the kernels the engine runs (DESIGN §2.5), and the hooks the engine calls to
write to it.

Three things record a stretch of execution and play it again later, and all three record here, into a `Tape`
installed with ``recording(tape)``:

* a ``@plast.jit`` trace (`Trace`, plast._jit.trace): every kernel, copy, fused update and random fill of the
  traced step, over the tensors it ran on; the plan replays them (graph/_replay.pyx, or a CUDA graph captured
  from the same steps, kernels/cuda/graphs.py);
* an eager backward pass being recorded (autograd/backward_replay.py's recorder): its kernels and copies, each
  turned at once into a step over stand-in tensors; its Program replays them (graph/_replay.pyx);
* an eager optimizer step's fused updates (`UpdateCapture`, graph/_mutation.pyx): the steps an UpdateReplay runs
  again with later steps' gradients.

The engine's hooks (``note_kernel``, ``note_copy``, ``note_mutation``, ``note_random``) hand every kernel call to
the tape as a `Step`; a tape keeps what it can replay and says so where it cannot. Only one recording runs at a
time, in one thread: it holds the engine lock (graph/threads.py) from start to end, and another thread's
kernels are never handed to it. The tape lives in the graph layer so that the layers that run kernels
(graph/realize.py, graph/_scheduler.pyx, graph/inplace.py, graph/_mutation.pyx, autograd, ops) can write to it
without importing what records above them; kernels never see it.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Hashable

from ..kernels.cpu.kernels import copy as cpu_copy
from ..kernels.cpu.kernels import np_view
from ..kernels.host import copy_values, host_array, write_host
from .threads import bind_arenas, engine_lock, get_ident

_tape = None  # the Tape being recorded, or None
_owner = None  # the thread recording it (the hooks below ignore every other thread)
_host_side = 0  # >0 while runtime_input callbacks run: their writes are not part of the plan
_trace_listeners: list[Callable[[bool], None]] = []  # told when a jit trace starts (True) and ends (False)


def tracing() -> bool:
    """True while a @plast.jit function is being traced (not while a backward pass or an optimizer's updates
    are recorded: those run as they would unrecorded)."""
    return _tape is not None and _tape.traces and _owner == get_ident()


def active():
    """The Tape the calling thread records, or None."""
    return _tape if _tape is not None and _owner == get_ident() else None


@contextlib.contextmanager
def recording(tape):
    """Make `tape` the recording for the block: every kernel the engine runs in it is handed to
    ``tape.kernel``."""
    global _tape, _owner
    if active() is not None:
        raise RuntimeError(f"plast: cannot record {tape.what} while {_tape.what} is being recorded")
    with engine_lock:  # another thread's recording or computation finishes first
        bind_arenas()
        _tape, _owner = tape, get_ident()
        try:
            if tape.traces:
                for listener in _trace_listeners:
                    listener(True)
            yield tape
        finally:
            _tape = _owner = None
            if tape.traces:
                for listener in _trace_listeners:
                    listener(False)


def on_trace(listener: Callable[[bool], None]) -> None:
    """Call ``listener(True)`` when a @plast.jit trace starts and ``listener(False)`` when it ends: code that
    asks "am I being traced?" on every call (a module's ``__call__``) keeps the answer in a variable of its own
    instead of calling tracing() each time."""
    _trace_listeners.append(listener)


class Step:
    """One kernel call of a recording: ``kernel(node, inputs, outputs)`` with tensors bound to the recording's
    memory. `kind` is "kernel", "copy", "random" (a fill that draws again on replay) or "mutation" (a fused
    update writing ``inputs[i] for i in mutated`` in place)."""

    __slots__ = ("kernel", "node", "inputs", "outputs", "what", "kind", "mutated")

    def __init__(self, kernel, node, inputs, outputs, what, kind="kernel", mutated=()):
        self.kernel = kernel
        self.node = node
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.what = what
        self.kind = kind
        self.mutated = tuple(mutated)

    def __repr__(self):
        return f"<Step {self.what}>"


class Tape:
    """A recording: the steps handed to it, in order. Subclasses keep what their replay needs."""

    traces = False  # a jit trace: ops that read values in Python refuse, memory is not planned (see Trace)
    what = "a recording"

    def __init__(self):
        self.steps = []

    def kernel(self, kernel, node, inputs, outputs, what, kind="kernel", mutated=()):
        self.steps.append(Step(kernel, node, inputs, outputs, what, kind, mutated))


class Trace(Tape):
    """A ``@plast.jit`` trace: every step, over the tensors it ran on, the storages kernels allocated (the
    plan's memory), the runtime inputs to call before each replay and the state keys that invalidate the plan.
    While it records, the scheduler plans no memory (the plan lays out its own) and ops that would read values
    in Python refuse."""

    traces = True
    what = "a @plast.jit trace"

    def __init__(self):
        super().__init__()
        self.created = {}  # id(storage) -> storage, for storages allocated by kernels while tracing
        self.runtime_inputs = []
        self.states = []  # (weakref(obj), keyfn, key)

    def kernel(self, kernel, node, inputs, outputs, what, kind="kernel", mutated=()):
        if kind == "kernel" or kind == "random":
            for o in outputs:
                self.created[id(o._storage)] = o._storage
        self.steps.append(Step(kernel, node, inputs, outputs, what, kind, mutated))


class UpdateCapture(Tape):
    """An eager optimizer step's fused updates (graph/_mutation.UpdateReplay's input). Only the updates are
    kept: what their inputs needed computed first is computed again by each replay."""

    what = "an optimizer's updates"

    def kernel(self, kernel, node, inputs, outputs, what, kind="kernel", mutated=()):
        if kind == "mutation":
            self.steps.append(Step(kernel, node, inputs, outputs, what, kind, mutated))


# ---- hooks the engine calls -------------------------------------------------------------------------------


def note_kernel(kernel, node, inputs, outputs):
    """graph/realize.py ran an op kernel."""
    if _tape is not None and not _host_side and _owner == get_ident():
        _tape.kernel(kernel, node, inputs, outputs, node.op.name)


def note_copy(dst, src, what="copy"):
    """A value was copied into dst's memory outside an op kernel (in-place writes, gradient write-back)."""
    if _tape is not None and not _host_side and _owner == get_ident():
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


def note_mutation(node, mutated):
    """A fused in-place kernel (optimizer update) ran on node.inputs, writing ``node.inputs[i] for i in
    mutated``."""
    if _tape is not None and not _host_side and _owner == get_ident():
        if _tape.traces:
            node.reruns = True  # a plan step: its kernel may keep what it packs (node.scratch)
        kernel = node.op.kernels[node.inputs[0].device.type]
        _tape.kernel(kernel, node, node.inputs, [], node.op.name, "mutation", mutated)


def note_random(fill_fn, t, what):
    """t was filled with random numbers by fill_fn(t) (on t's device); a replay draws again, from the
    generator's offset then."""
    if _tape is not None and not _host_side and _owner == get_ident():
        _tape.kernel(lambda node, inputs, outputs: fill_fn(outputs[0]), None, [], [t], what, "random")


def note_state(obj: object, keyfn: Callable[[], Hashable], key: Hashable = None) -> None:
    """Record keyfn() of obj (or `key`, the value keyfn() must have when a later call begins); a later call whose
    keyfn() differs traces again (modules: training flag and parameters)."""
    if tracing():
        _tape.states.append((weakref.ref(obj), keyfn, keyfn() if key is None else key))


def note_host(fn: Callable[[list], object], tensors: list, what: str) -> None:
    """Host code read and wrote `tensors`' memory outside any kernel (a collective of plast.distributed, run with
    ``host_side()``): a @plast.jit plan calls ``fn(tensors)`` again at this point of every replay. Other
    recordings keep nothing: a backward replay or an optimizer-update replay runs the same hooks again, which
    call the host code themselves."""
    if _tape is not None and not _host_side and _owner == get_ident() and _tape.traces:
        _tape.kernel(lambda node, inputs, outputs: fn(inputs), None, tensors, tensors, what, "copy")


def in_host_side() -> bool:
    """True inside ``host_side()`` (or a runtime input) of the calling thread's recording."""
    return _host_side > 0 and _tape is not None and _owner == get_ident()


@contextlib.contextmanager
def host_side():
    """Writes in the block are host code the calling thread's recording does not take as steps (note_host)."""
    global _host_side
    mine = _tape is not None and _owner == get_ident()
    if mine:
        _host_side += 1
    try:
        yield
    finally:
        if mine:
            _host_side -= 1


def runtime_input(fn: Callable[[], object]) -> None:
    """Call fn now and before every replay of the plan being traced. What fn writes (e.g. an optimizer copying
    the current learning rate into its hyperparameter tensor) is a runtime input, not part of the plan."""
    global _host_side
    if _tape is None or _owner != get_ident():  # (inline active(): every eager optimizer step comes here)
        fn()
        return
    if _tape.traces:
        _tape.runtime_inputs.append(fn)
    _host_side += 1
    try:
        fn()
    finally:
        _host_side -= 1
