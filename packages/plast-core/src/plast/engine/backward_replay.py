"""Eager ``backward()`` through replayed programs: when to replay, and how a program is built (the replay itself
and the graph key are compiled, engine/_backward_replay.pyx, whose docstring tells the whole story).

A key's first backward runs the ordinary way; its second runs the ordinary way while every kernel is recorded,
and the recording becomes the key's Program; later ones replay it. A graph whose backward reads anything a
replay could not rebind (memory computed before the call, values read in Python by a backward rule) is marked
unreplayable and keeps running the ordinary way. ``PLAST_PLAN_CACHE=0`` turns replays off with the plan cache.
"""

import contextlib

from . import _backward_replay as _br
from . import realize
from ._backward import root_ones
from ._graph import Node, tensor_class
from ._scheduler import _GroupKernel, set_capture
from .planner import place

stats = _br.stats
clear = _br.clear
try_replay = _br.try_replay  # compiled: the entry point, called by every eligible backward()


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
    capture, checked = [], []
    realizes = realize._STATS["realizes"]
    set_capture(capture)
    try:
        visited = run([root], [ones], checked)
    finally:
        set_capture(None)
    program = None
    try:
        if realize._STATS["realizes"] - realizes > 1:
            raise Unreplayable("a backward rule computed values before the gradients' realize")
        program = build(s, capture, checked, visited, grads_before, ones)
    except Unreplayable as e:
        if realize._DEBUG:
            print(f"plast backward replay: not replayable ({len(s.order)} nodes): {e}")
    _br.store(s, program)
    if realize._DEBUG and program is not None:
        print(f"plast backward replay: program of {program.n_steps} kernels for {len(s.order)} forward nodes")


def build(s, capture, checked, visited, grads_before, ones):
    """The Program that does what the recorded backward call did (`capture`: its kernels, in order)."""
    n = len(s.leaves)
    pos = {id(node): i for i, node in enumerate(s.order)}
    # memory the call read that the next graph brings: its input tensors' and their gradients'
    given, shared = {}, set()
    bases = [0] * (2 * n)
    for i, t in enumerate(list(s.leaves) + grads_before):
        if t is None:
            continue
        k = id(t._storage)
        bases[i] = t._offset
        if k not in given:
            given[k] = i
        elif i >= n:
            shared.add(k)  # a gradient in an input's memory: which one a read means is not known
        # else: inputs sharing memory share it the same way on every graph with this key (scan hashes how), so
        # a read of it goes through the first of them

    from ..tensor import _SCALAR_CACHE

    consts = {id(c._storage) for c in _SCALAR_CACHE.values()}
    consts.add(id(ones._storage))
    # An input that is a shared constant (``x * 2.0`` reads the cached 2.0) may be read by a backward rule as
    # that constant (the 2 of ``d(x**2)``): which reads mean the input is not known, so the program only
    # replays on graphs whose input there is this same constant.
    guards = [(i, t) for i, t in enumerate(s.leaves) if id(t._storage) in consts]
    written = {}  # id(storage) -> index among the memory the kernels write
    nbytes, persistent, first, last = [], [], {}, {}
    alias_of, aliases, alias_src, alias_delta = {}, [], [], []

    def bind(t, step, writes):
        st = t._storage
        if st is None or type(st).__name__ != "Storage":
            raise Unreplayable(f"step {step} uses a tensor with no CPU memory")
        k = id(st)
        w = written.get(k)
        if w is None and writes:
            if k in given or k in consts:
                raise Unreplayable(f"step {step} writes into memory the graph reads")
            w = written[k] = len(nbytes)
            nbytes.append(st.nbytes)
            persistent.append(st.arena is not None and not st.arena.transient)
            first[w] = step
        if w is not None:
            last[w] = step
            src, base = 2 * n + w, 0
        elif k in given and k not in shared:
            src = given[k]
            base = bases[src]
        elif k in consts:  # a constant: the program keeps the memory
            a = alias_of.get(id(t))
            if a is None:
                a = alias_of[id(t)] = tensor_class()._from_storage(
                    st, t.shape, t.dtype, t.device, t._strides, t._offset
                )
            return a
        else:
            raise Unreplayable(
                f"step {step} reads memory computed before the call ({tuple(t.shape)}, {t.dtype})"
            )
        a = alias_of.get(id(t))
        if a is None:
            a = tensor_class()._from_storage(None, t.shape, t.dtype, t.device, t._strides, 0)
            alias_of[id(t)] = a
            aliases.append(a)
            alias_src.append(src)
            alias_delta.append(t._offset - base)
        return a

    from .jit import Step

    steps = []
    for i, (kernel, node, inputs, outputs) in enumerate(capture):
        if isinstance(kernel, _GroupKernel) and _holds_tensor(kernel.args):
            raise Unreplayable(f"fused kernel {node.op.name} has tensor arguments")
        ins = [bind(t, i, False) for t in inputs]
        outs = [bind(t, i, True) for t in outputs]
        stand_in = None
        if node is not None:  # the kernel reads op, args, specs, device: not the node's edges
            stand_in = Node(node.op, (), node.args, node.specs, node.device)
            stand_in.outputs = []
        steps.append(Step(kernel, stand_in, ins, outs, node.op.name if node is not None else "copy"))
    end = len(capture)
    held = []
    for i, node in enumerate(s.order):
        for j, ref in enumerate(node.outputs):
            t = ref()
            if t is None or t._storage is None:
                continue
            w = written.get(id(t._storage))
            if w is not None:
                held.append((i, j, 2 * n + w, t._offset))
                last[w] = end
    grads = []
    for i, t in enumerate(s.leaves):
        g = t.grad
        if g is grads_before[i]:
            continue
        w = written.get(id(g._storage)) if g is not None else None
        if w is None or not persistent[w] or g._offset != 0 or not g.is_contiguous():
            raise Unreplayable("a gradient is not memory the call wrote")
        grads.append((i, 2 * n + w, g._shape, g.dtype))  # _shape: an exact tuple (new_lazy takes it as is)
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
    sizes = {w: b for w, b in enumerate(nbytes) if not persistent[w]}
    offsets, total = place(sizes, first, last) if sizes else ({}, 0)
    block_offset = [offsets[w] if w in offsets else -1 for w in range(len(nbytes))]
    from ._replay import compile_steps

    compiled = compile_steps(steps)
    for a in aliases:
        a._storage = None
    return _br.Program(
        list(s.sig), n, compiled, aliases, alias_src, alias_delta, nbytes, block_offset, total,
        check_pos, finals, held, grads, guards,
    )  # fmt: skip


def _holds_tensor(args):
    from ._graph import TensorBase

    return any(isinstance(a, TensorBase) or (isinstance(a, (tuple, list)) and _holds_tensor(a)) for a in args)
