"""The plain scheduler: realize the unrealized part of a graph in topological order (engine I).

The plan cache, the liveness planner and fusion (engine II) slot in here: they change how `order` is computed
and executed, not what a kernel sees.
"""

import contextlib
import os

from ..kernels.host import host_array
from ..memory import arenas as _arenas
from . import chains, fusion, tape
from ._graph import plan_cache_enabled
from ._scheduler import (
    CHAIN,
    RULE,
    analyze,
    chain_inputs,
    execute,
    op_sequence,
    planned_slots,
    rebuild_groups,
    schedule,
)
from .planner import place
from .threads import bind_arenas, engine_lock, get_ident, other_threads


def _check_nan(node, outs):
    import numpy as np

    for i, o in enumerate(outs):
        if o.dtype.is_floating_point and o.numel() and np.isnan(host_array(o)).any():
            shapes = ", ".join(str(tuple(t.shape)) for t in node.inputs)
            raise RuntimeError(
                f"anomaly detected: op {node.op.name!r} produced NaN in output {i} (shape {tuple(o.shape)}) "
                f"from inputs of shapes {shapes}"
            )


# ---- plan cache --------------------------------------------------------------------------------------------

_PLANS = {}
_STATS = {"hits": 0, "misses": 0, "realizes": 0, "nodes": 0, "fused_groups": 0, "fused_nodes": 0}
_DEBUG = os.environ.get("PLAST_DEBUG", "0") not in ("", "0")


_FIRED = None  # a list while watch_fusions() is active: names of the fusion rules that ran, in order


@contextlib.contextmanager
def watch_fusions():
    """Collect the names of the fusion rules (and elementwise chains) that run inside the block (tests, debugging).

    with watch_fusions() as fired:
        (x @ w + b).relu().numpy()
    fired == ["matmul_bias_relu"]
    """
    global _FIRED
    prev, _FIRED = _FIRED, []
    try:
        yield _FIRED
    finally:
        _FIRED = prev


_cache_enabled = (
    plan_cache_enabled  # PLAST_PLAN_CACHE=0 turns the plan cache off (compiled: read per realize)
)


def scheduler_stats(reset=False):
    """Counts of the scheduler: plan-cache hits and misses, realize calls, nodes run, fused groups."""
    out = dict(_STATS, cached_plans=len(_PLANS))
    if reset:
        for k in _STATS:
            _STATS[k] = 0
    return out


class Plan:
    """What the scheduler decided for one graph shape: fused groups (as (root position, rule)) and the layout of
    the graph's internal intermediates in one transient block ({(position, output): byte offset}, block bytes)."""

    __slots__ = ("groups", "layout", "block_bytes", "ops", "_slots")

    def __init__(self, groups, layout, block_bytes, ops):
        self.groups = groups
        self.layout = layout
        self.block_bytes = block_bytes
        self.ops = ops  # the graph's op sequence: a fingerprint match with other ops is a hash collision
        self._slots = None

    def slots(self, order):
        """[(position, output, byte offset, bytes)] of the planned intermediates; sizes are read from `order` the
        first time (every graph with this plan's fingerprint has the same specs)."""
        if self._slots is not None:
            return self._slots
        out = []
        for (i, j), off in self.layout.items():
            shape, dtype = order[i].specs[j]
            out.append((i, j, off, max(1, _numel(shape)) * dtype.itemsize))
        self._slots = out
        return out


def _memory_plan(order, internal, covered, groups):
    """Offsets for the intermediates that live and die inside this graph (liveness-based reuse, graph/planner.py)."""
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


def _plan_entry(g, pos, internal):
    """How a cached plan remembers fused group `g` (positions in the order, not nodes; _scheduler.rebuild_groups
    binds them to the next graph with this fingerprint)."""
    if g.rule is chains.RULE:
        return (CHAIN, tuple(pos[id(n)] for n in g.nodes), {chain_inputs(g.nodes)[1]: g.args[0]})
    root = g.nodes[-1]
    caps, cov = {}, []
    fusion._match(g.rule.pattern, root, internal, caps, cov)
    recipe = []
    for name, t in caps.items():  # where each captured tensor is read: (node position, input index)
        p, k = next((pos[id(n)], k) for n in g.nodes for k, x in enumerate(n.inputs) if x is t)
        recipe.append((name, p, k))
    return (RULE, g.rule, tuple(pos[id(n)] for n in g.nodes[:-1]), pos[id(root)], tuple(recipe))


def _plan(order):
    """Fused groups and memory layout for `order`, from the plan cache when its fingerprint was seen before."""
    internal, fp = analyze(order)
    fuse = fusion.enabled()
    key = (fp, fuse) if _cache_enabled() else None
    cached = _PLANS.get(key) if key is not None else None
    if cached is not None and cached.ops != op_sequence(order):
        cached = None  # a hash collision: plan this graph afresh (and let it take the slot)
    if cached is not None:
        _STATS["hits"] += 1
        if _DEBUG:
            print(f"plast scheduler: plan cache hit ({len(order)} nodes, {len(cached.groups)} fused groups)")
        groups, covered = rebuild_groups(cached.groups, order)
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
    layout, total = _memory_plan(order, internal, covered, groups) if not tape.tracing() else ({}, 0)
    pos = {id(n): i for i, n in enumerate(order)}
    plan = Plan(
        [_plan_entry(g, pos, internal) for g in groups.values()],
        layout,
        total,
        op_sequence(order),
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


def realize(targets, place=None):
    """Compute every tensor in `targets` (and what they need) that has no value yet. `place` ({(id(node),
    output): storage}) names memory some outputs must be written to (gradients straight into persistent
    memory, autograd/_backward.place_gradients)."""
    locked = (
        other_threads() != 0 and engine_lock.acquire()
    )  # one thread computes at a time (graph/threads.py)
    try:
        if _arenas.bound_thread != get_ident():  # (bind_arenas(), inline: once per realize)
            bind_arenas()
        order = schedule(targets)
        if not order:
            return targets
        _STATS["realizes"] += 1
        _STATS["nodes"] += len(order)
        groups, covered, slots = {}, (), place or None
        if len(order) > 1:
            groups, covered, plan = _plan(order)
            if plan.layout and not tape.tracing():
                block = _arenas.transient(order[0].device.type).new(plan.block_bytes)
                slots = planned_slots(order, plan.slots(order), block, place)
                block = None
        n_groups, n_fused = execute(order, groups, covered, slots, _check_nan)
        if _FIRED is not None and groups:
            _FIRED.extend(groups[id(n)].rule.name for n in order if id(n) in groups)
        if n_groups:
            _STATS["fused_groups"] += n_groups
            _STATS["fused_nodes"] += n_fused
        return targets
    finally:
        if locked:
            engine_lock.release()
