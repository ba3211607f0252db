"""Eager ``backward()`` through replayed programs: when to replay, and how a program is built (the replay itself
and the graph key are compiled, autograd/_backward_replay.pyx, whose docstring tells the whole story).

A key's first backward runs the ordinary way; its second runs the ordinary way while every kernel is recorded,
and the recording becomes the key's Program; later ones replay it. A graph whose backward reads anything a
replay could not rebind (memory computed before the call, values read in Python by a backward rule) is marked
unreplayable and keeps running the ordinary way, as is a graph through a custom ``autograd.Function``
(autograd/function.py). ``PLAST_PLAN_CACHE=0`` turns replays off with the plan cache.
"""

import contextlib
import weakref

from .._core._structs import Node, TensorBase
from ..graph import realize
from ..graph._graph import tensor_class
from ..graph._replay import compile_steps
from ..graph._scheduler import _GroupKernel
from ..graph.planner import place
from ..graph.tape import Step, Tape, recording
from ..ops.factory import SCALAR_CACHE
from . import _backward_replay as _br
from ._backward import root_ones
from .engine import backward_leaves
from .function import is_function_row

stats = _br.stats
clear = _br.clear


try_replay = _br.try_replay  # compiled: ``root.backward()`` through a replayed program, or record one


@contextlib.contextmanager
def disabled():
    """Backward runs the ordinary way inside the block (tests compare the two; bench/ counts the ops a step
    records)."""
    _br.set_off(1)
    try:
        yield
    finally:
        _br.set_off(-1)


class Unreplayable(Exception):
    """What a backward call did can't be replayed on the next graph with its key (the message says why)."""


def record(s, root, run):
    """Run ``root.backward()`` the ordinary way (`run`, ``run(roots, grad_roots, checked) -> nodes visited``) on
    the graph of Scan `s`, recording its kernels, and keep the Program they make (or mark the key unreplayable)."""
    grads_before = [t.grad for t in s.leaves]
    ones = root_ones(root)
    checked = []
    rec = _Recorder(s, grads_before, ones)
    realizes = realize._STATS["realizes"]
    with recording(rec):
        visited = run([root], [ones], checked)
    program = None
    try:
        if realize._STATS["realizes"] - realizes > 1:
            raise Unreplayable("a backward rule computed values before the gradients' realize")
        if any(is_function_row(node.op) for node in visited):
            # a custom Function's Python backward may depend on anything, not only on what the key hashes
            raise Unreplayable("the graph holds a custom autograd.Function (its backward is Python)")
        program = rec.finish(checked, visited)
    except Unreplayable as e:
        if realize._DEBUG:
            print(f"plast backward replay: not replayable ({len(s.order)} nodes): {e}")
    _br.store(s, program)
    if realize._DEBUG and program is not None:
        print(f"plast backward replay: program of {program.n_steps} kernels for {len(s.order)} forward nodes")


def _live(table, obj):
    """table[id(obj)]'s value if that entry is obj's (a dead object's id may have been reused), else None."""
    e = table.get(id(obj))
    return e[1] if e is not None and e[0]() is obj else None


class _Recorder(Tape):
    """The tape of a recorded backward call, building its Program while it runs: the engine hands it each kernel
    and copy it runs (``kernel``, graph/tape's hooks), and each becomes a step over stand-in tensors at once. Nothing
    of the call is held, so its intermediate results die when the ordinary backward drops them, as they do
    without a recording (holding every kernel's tensors until the end made the recording call's memory the sum
    of all of them). Memory is told apart by its storage object, through weak references: a storage that died
    may leave its id to a new one. ``finish`` makes the Program, or raises Unreplayable."""

    what = "a backward pass"

    def __init__(self, s, grads_before, ones):
        super().__init__()
        self.s, self.grads_before = s, grads_before
        n = self.n = len(s.leaves)
        # memory the call read that the next graph brings: its input tensors' and their gradients' (alive
        # throughout: s.leaves and grads_before hold them)
        self.given, self.shared = {}, set()
        self.bases = [0] * (2 * n)
        for i, t in enumerate(list(s.leaves) + grads_before):
            if t is None:
                continue
            k = id(t._storage)
            self.bases[i] = t._offset
            if k not in self.given:
                self.given[k] = i
            elif i >= n:
                self.shared.add(k)  # a gradient in an input's memory: which one a read means is not known
            # else: inputs sharing memory share it the same way on every graph with this key (scan hashes how),
            # so a read of it goes through the first of them

        self.consts = {id(c._storage) for c in SCALAR_CACHE.values()}
        self.consts.add(id(ones._storage))
        self.const_refs = [ones]  # (the cache holds its constants)
        # An input that is a shared constant (``x * 2.0`` reads the cached 2.0) may be read by a backward rule
        # as that constant (the 2 of ``d(x**2)``): which reads mean the input is not known, so the program only
        # replays on graphs whose input there is this same constant.
        self.guards = [(i, t) for i, t in enumerate(s.leaves) if id(t._storage) in self.consts]
        self.written = {}  # id(storage) -> (weakref, index among the memory the kernels write)
        self.nbytes, self.persistent, self.first, self.last = [], [], {}, {}
        self.alias_of = {}  # id(tensor) -> (weakref, its stand-in)
        self.aliases, self.alias_src, self.alias_delta = [], [], []
        self.failed = None

    def kernel(self, kernel, node, inputs, outputs, what, kind="kernel", mutated=()):
        if self.failed is not None:
            return
        try:
            if kind != "kernel" and kind != "copy":
                raise Unreplayable(f"backward ran {what} ({kind}): a program replays kernels and copies only")
            self._step(kernel, node, inputs, outputs, what)
        except Unreplayable as e:
            self.failed = e
            self.steps = self.aliases = None  # nothing more to build

    def _bind(self, t, step, writes):
        st = t._storage
        if st is None or type(st).__name__ != "Storage":
            raise Unreplayable(f"step {step} uses a tensor with no CPU memory")
        k = id(st)
        w = _live(self.written, st)
        if w is None and writes:
            if k in self.given or k in self.consts:
                raise Unreplayable(f"step {step} writes into memory the graph reads")
            w = len(self.nbytes)
            self.written[k] = (weakref.ref(st), w)
            self.nbytes.append(st.nbytes)
            self.persistent.append(st.arena is not None and not st.arena.transient)
            self.first[w] = step
        if w is not None:
            self.last[w] = step
            src, base = 2 * self.n + w, 0
        elif k in self.given and k not in self.shared:
            src = self.given[k]
            base = self.bases[src]
        elif k in self.consts:  # a constant: the program keeps the memory
            a = _live(self.alias_of, t)
            if a is None:
                a = tensor_class()._from_storage(st, t.shape, t.dtype, t.device, t._strides, t._offset)
                self.alias_of[id(t)] = (weakref.ref(t), a)
            return a
        else:
            raise Unreplayable(
                f"step {step} reads memory computed before the call ({tuple(t.shape)}, {t.dtype})"
            )
        a = _live(self.alias_of, t)
        if a is None:
            a = tensor_class()._from_storage(None, t.shape, t.dtype, t.device, t._strides, 0)
            self.alias_of[id(t)] = (weakref.ref(t), a)
            self.aliases.append(a)
            self.alias_src.append(src)
            self.alias_delta.append(t._offset - base)
        return a

    def _step(self, kernel, node, inputs, outputs, what):
        i = len(self.steps)
        if isinstance(kernel, _GroupKernel) and _holds_tensor(kernel.args):
            raise Unreplayable(f"fused kernel {node.op.name} has tensor arguments")
        ins = [self._bind(t, i, False) for t in inputs]
        outs = [self._bind(t, i, True) for t in outputs]
        stand_in = None
        if node is not None:  # the kernel reads op, args, specs, device: not the node's edges
            stand_in = Node(node.op, (), node.args, node.specs, node.device)
            stand_in.outputs = []
        self.steps.append(Step(kernel, stand_in, ins, outs, what))

    def finish(self, checked, visited):
        """The Program of the recorded call (`checked`: nodes whose saved inputs backward checked; `visited`:
        the nodes it went through)."""
        if self.failed is not None:
            raise self.failed
        s, n, written, last = self.s, self.n, self.written, self.last
        pos = {id(node): i for i, node in enumerate(s.order)}
        end = len(self.steps)
        held = []
        for i, node in enumerate(s.order):
            for j, ref in enumerate(node.outputs):
                t = ref()
                if t is None or t._storage is None:
                    continue
                w = _live(written, t._storage)
                if w is not None:
                    held.append((i, j, 2 * n + w, t._offset))
                    last[w] = end
        grads = []
        for i, t in enumerate(s.leaves):
            g = t.grad
            if g is self.grads_before[i]:
                continue
            w = _live(written, g._storage) if g is not None else None
            if w is None or not self.persistent[w] or g._offset != 0 or not g.is_contiguous():
                raise Unreplayable("a gradient is not memory the call wrote")
            grads.append(
                (i, 2 * n + w, g._shape, g.dtype)
            )  # _shape: an exact tuple (new_lazy takes it as is)
        check_pos = []
        for node in checked:
            if id(node) not in pos:
                raise Unreplayable("backward checked a node outside the graph")
            check_pos.append(pos[id(node)])
        if any(id(node) not in pos for node in visited):
            raise Unreplayable("backward visited a node outside the graph")
        finals = [
            (
                node.done,
                0 if node.inputs else (1 if node.inputs is None else 2),
                node.done and not node.needs_grad,
            )
            for node in s.order
        ]
        # the transient memory in one block, slots reused once dead (the liveness planner); gradients persistent
        nbytes, persistent = self.nbytes, self.persistent
        sizes = {w: b for w, b in enumerate(nbytes) if not persistent[w]}
        offsets, total = place(sizes, self.first, last) if sizes else ({}, 0)
        block_offset = [offsets[w] if w in offsets else -1 for w in range(len(nbytes))]
        compiled = compile_steps(self.steps)
        for a in self.aliases:
            a._storage = None
        return _br.Program(
            list(s.sig), n, compiled, self.aliases, self.alias_src, self.alias_delta, nbytes, block_offset,
            total, check_pos, finals, held, grads, self.guards,
        )  # fmt: skip


def _holds_tensor(args):
    return any(isinstance(a, TensorBase) or (isinstance(a, (tuple, list)) and _holds_tensor(a)) for a in args)


def _record_program(s, root):
    record(s, root, backward_leaves)


_br.bind_recorder(_record_program)
