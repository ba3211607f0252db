"""The plain scheduler: realize the unrealized part of a graph in topological order (engine I).

The plan cache, the liveness planner and fusion (engine II) slot in here: they change how `order` is computed
and executed, not what a kernel sees.
"""

import os
import sys

from .. import _arenas
from ..memory.arena import view_of
from . import autograd_state, chains, fusion, jit
from .graph import add_readers


def schedule(targets):
    """Nodes needed to realize `targets`, in topological order (inputs first)."""
    order = []
    seen = set()
    stack = []
    for t in targets:
        if t._storage is None and t._node is not None:
            stack.append((t._node, False))
    while stack:
        node, expanded = stack.pop()
        nid = id(node)
        if expanded:
            order.append(node)
            continue
        if nid in seen:
            continue
        seen.add(nid)
        if node.inputs is None:
            raise RuntimeError(
                f"this tensor's value can't be computed any more: the graph that produces it ({node.op.name}) was "
                "freed by backward(). Read values before backward, or pass retain_graph=True"
            )
        stack.append((node, True))
        for inp in node.inputs:
            if inp._storage is None and inp._node is not None and id(inp._node) not in seen:
                stack.append((inp._node, False))
    return order


def _outputs(node):
    from ..tensor import Tensor

    outs = []
    for i, ref in enumerate(node.outputs):
        t = ref()
        if t is None:  # nobody holds this output; the kernel still needs somewhere to write it
            shape, dtype = node.specs[i]
            t = Tensor._lazy(shape, dtype, node.device, node, i)
        outs.append(t)
    return outs


def _unallocate(outs):
    """A kernel raised (bad indices are data, checked as it runs): its outputs hold no value, so a later read
    must run it again (and raise again), never return the uninitialized memory."""
    for o in outs:
        o._storage = None
        o._npcache = None


def _finish_node(node, outs):
    node.done = True
    for o in outs:
        if o._readers is not None:
            # readers recorded while this output had no memory now watch its memory
            if o._storage is not None:
                add_readers(o._storage, o._readers)
            o._readers = None
    if not node.needs_grad:
        # Nothing will differentiate through this node: drop the edges so inputs can be freed now.
        for o in outs:
            o._node = None
        node.inputs = ()


def _run(node, slots=None):
    op = node.op
    outs = _outputs(node)
    dev_type = node.device.type
    kernel = op.kernels.get(dev_type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {dev_type} kernel yet")
    for t in node.inputs:
        t._storage.check()
    if op.view:
        storage, strides, offset = kernel(node, node.inputs, outs)
        o = outs[0]
        o._storage, o._strides, o._offset = storage, strides, offset
    else:
        arena = _arenas.transient(dev_type)
        for j, o in enumerate(outs):
            st = slots.get((id(node), j)) if slots else None
            o._storage = st if st is not None else arena.new(o.numel() * o.dtype.itemsize)
        try:
            kernel(node, node.inputs, outs)
        except BaseException:
            _unallocate(outs)
            raise
        if jit._tape is not None:
            jit.note_kernel(kernel, node, node.inputs, outs)
        if autograd_state.anomaly_detection:
            _check_nan(node, outs)
    _finish_node(node, outs)


def _check_nan(node, outs):
    import numpy as np

    from ..backends.cpu.kernels import np_view

    for i, o in enumerate(outs):
        if o.dtype.is_floating_point and o.numel() and np.isnan(np_view(o)).any():
            shapes = ", ".join(str(tuple(t.shape)) for t in node.inputs)
            raise RuntimeError(
                f"anomaly detected: op {node.op.name!r} produced NaN in output {i} (shape {tuple(o.shape)}) "
                f"from inputs of shapes {shapes}"
            )


# ---- plan cache --------------------------------------------------------------------------------------------

_PLANS = {}
_STATS = {"hits": 0, "misses": 0, "realizes": 0, "nodes": 0, "fused_groups": 0, "fused_nodes": 0}
_DEBUG = os.environ.get("PLAST_DEBUG", "0") not in ("", "0")


def _cache_enabled():
    return os.environ.get("PLAST_PLAN_CACHE", "1") != "0"


def scheduler_stats(reset=False):
    """Counts of the scheduler: plan-cache hits and misses, realize calls, nodes run, fused groups."""
    out = dict(_STATS, cached_plans=len(_PLANS))
    if reset:
        for k in _STATS:
            _STATS[k] = 0
    return out


def _internal_outputs(order):
    """(id(node), output index) of every output that fusion may leave unmaterialized: consumed by exactly one
    node of `order`, held by nothing else, and not read by that consumer's backward."""
    pos = {id(n): i for i, n in enumerate(order)}
    uses = {}
    consumer = {}
    for n in order:
        for t in n.inputs:
            p = t._node
            if p is None or id(p) not in pos or t._storage is not None:
                continue
            k = (id(p), t._index)
            uses[k] = uses.get(k, 0) + 1
            prev = consumer.get(k)
            consumer[k] = n if prev is None or prev is n else False
    t = None  # noqa: F841 -- the loop variable would otherwise hold one reference to the last input
    internal = set()
    for k, c in consumer.items():
        if c is False or (c.needs_grad and c.op.saves_inputs):
            continue
        p = order[pos[k[0]]]
        ref = p.outputs[k[1]]
        # NOTE: getrefcount counts its own argument; every other reference must come from the consumer's inputs.
        if ref() is None or sys.getrefcount(ref()) - 1 != uses[k]:
            continue
        internal.add(k)
    return internal


def _fingerprint(order, internal):
    """Structural key of a graph: ops, arguments, shapes, dtypes, devices, edges, and which outputs are internal;
    never data."""
    pos = {id(n): i for i, n in enumerate(order)}
    parts = []
    for n in order:
        ins = []
        for t in n.inputs:
            p = t._node
            if p is not None and id(p) in pos and t._storage is None:
                ins.append((pos[id(p)], t._index))
            else:
                ins.append((t._shape, t.dtype.code, t._strides))
        flags = tuple((id(n), i) in internal for i in range(len(n.specs)))
        parts.append(
            (n.op.name, n.args, tuple((s, d.code) for s, d in n.specs), str(n.device), tuple(ins), flags)
        )
    return hash(tuple(parts))


class Plan:
    """What the scheduler decided for one graph shape: fused groups (as (root position, rule)) and the layout of
    the graph's internal intermediates in one transient block ({(position, output): byte offset}, block bytes)."""

    __slots__ = ("groups", "layout", "block_bytes")

    def __init__(self, groups, layout, block_bytes):
        self.groups = groups
        self.layout = layout
        self.block_bytes = block_bytes


def _memory_plan(order, internal, covered, groups):
    """Offsets for the intermediates that live and die inside this graph (liveness-based reuse, engine/planner)."""
    from .planner import place

    pos = {id(n): i for i, n in enumerate(order)}
    first, last, sizes = {}, {}, {}
    for i, n in enumerate(order):
        if id(n) in covered or n.op.view or n.needs_grad:
            continue
        for j, (shape, dtype) in enumerate(n.specs):
            if (id(n), j) in internal:
                k = (i, j)
                first[k] = i
                sizes[k] = max(1, _numel(shape)) * dtype.itemsize
    if len(sizes) < 2:
        return {}, 0
    for i, n in enumerate(order):
        for t in n.inputs:
            p = t._node
            if p is None or t._storage is not None or id(p) not in pos:
                continue
            k = (pos[id(p)], t._index)
            if k in sizes:
                if n.op.view:  # a view would outlive the slot's planned life; give it a block of its own
                    del sizes[k]
                    continue
                last[k] = max(last.get(k, i), i)
    # A fused group reads its inputs when its root runs, not where the covered members sit in the order.
    for rid, g in groups.items():
        rpos = pos[rid]
        for t in g.inputs:
            p = t._node
            if p is not None and t._storage is None and id(p) in pos:
                k = (pos[id(p)], t._index)
                if k in sizes:
                    last[k] = max(last.get(k, rpos), rpos)
    sizes = {k: v for k, v in sizes.items() if k in last}
    if len(sizes) < 2:
        return {}, 0
    offsets, total = place(sizes, first, last)
    return offsets, total


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _plan(order):
    """Fused groups and memory layout for `order`, from the plan cache when its fingerprint was seen before."""
    internal = _internal_outputs(order)
    fuse = fusion.enabled()
    key = (_fingerprint(order, internal), fuse) if _cache_enabled() else None
    cached = _PLANS.get(key) if key is not None else None
    if cached is not None:
        _STATS["hits"] += 1
        if _DEBUG:
            print(f"plast scheduler: plan cache hit ({len(order)} nodes, {len(cached.groups)} fused groups)")
        groups, covered = {}, set()
        for root_pos, rule, *rest in cached.groups:
            root = order[root_pos]
            if rest:  # an elementwise chain: its member positions
                nodes = [order[i] for i in rule]
                # NOTE: compiled again, not taken from the plan: which external inputs are one tensor (a shared
                # constant, x used twice) is data the fingerprint does not see, and the program depends on it.
                program, ext = chains.compile_chain(nodes)
                groups[id(root)] = fusion.Group(chains.RULE, nodes, chains.kernel, ext, (program,))
                covered.update(id(n) for n in nodes[:-1])
                continue
            caps, cov = {}, []
            fusion._match(rule.pattern, root, internal, caps, cov)
            kernel, inputs, args = rule.build(caps, root)
            groups[id(root)] = fusion.Group(rule, cov + [root], kernel, inputs, args)
            covered.update(id(n) for n in cov)
        return groups, covered, cached
    if key is not None:
        _STATS["misses"] += 1
    if fuse and fusion.may_fuse(order):
        groups, covered = fusion.find_groups(order, internal)
    else:
        groups, covered = {}, set()
    if fuse:
        for rid, (nodes, ext, program) in chains.find_chains(order, internal, covered | set(groups)).items():
            groups[rid] = fusion.Group(chains.RULE, nodes, chains.kernel, ext, (program,))
            covered.update(id(n) for n in nodes[:-1])
    layout, total = _memory_plan(order, internal, covered, groups) if jit._tape is None else ({}, 0)
    pos = {id(n): i for i, n in enumerate(order)}
    plan = Plan(
        [
            (pos[rid], g.rule)
            if g.rule is not chains.RULE
            else (pos[rid], [pos[id(n)] for n in g.nodes], g.args)
            for rid, g in groups.items()
        ],
        layout,
        total,
    )
    if key is not None:
        _PLANS[key] = plan
    if _DEBUG:
        names = ", ".join(g.rule.name for g in groups.values()) or "none"
        print(
            f"plast scheduler: plan cache {'miss' if key is not None else 'off'} ({len(order)} nodes; fused: "
            f"{names}; {len(layout)} intermediates in one {total}-byte block)"
        )
    return groups, covered, plan


def _run_group(g):
    root = g.nodes[-1]
    outs = _outputs(root)
    arena = _arenas.transient(root.device.type)
    for o in outs:
        o._storage = arena.new(o.numel() * o.dtype.itemsize)
    for t in g.inputs:
        t._storage.check()
    try:
        g.kernel(root, g.inputs, outs, g.args)
    except BaseException:
        _unallocate(outs)
        raise
    if jit._tape is not None:
        kernel, args = g.kernel, g.args
        jit.note_kernel(
            lambda node, inputs, outputs: kernel(node, inputs, outputs, args), root, g.inputs, outs
        )
    _STATS["fused_groups"] += 1
    _STATS["fused_nodes"] += len(g.nodes)
    _finish_node(root, outs)


def realize(targets):
    """Compute every tensor in `targets` (and what they need) that has no value yet."""
    order = schedule(targets)
    if not order:
        return targets
    _STATS["realizes"] += 1
    _STATS["nodes"] += len(order)
    groups, covered, slots = {}, (), None
    if len(order) > 1:
        groups, covered, plan = _plan(order)
        if plan.layout and jit._tape is None:
            block = _arenas.transient(order[0].device.type).new(plan.block_bytes)
            slots = {}
            for (i, j), off in plan.layout.items():
                shape, dtype = order[i].specs[j]
                slots[(id(order[i]), j)] = view_of(block, off, max(1, _numel(shape)) * dtype.itemsize)
            block = None
    for node in order:
        if id(node) in covered:
            continue
        g = groups.get(id(node))
        if g is None:
            _run(node, slots)
        else:
            _run_group(g)
    return targets
