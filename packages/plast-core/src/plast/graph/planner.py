"""The liveness planner: lay out a plan's internal intermediates in one block, reusing dead slots (DESIGN §3).

An intermediate lives from the first plan step that touches it to the last; two intermediates whose lives
overlap get disjoint byte ranges, others may share. Placement is greedy, largest first, at the lowest offset that
fits (the classic heuristic; optimal placement is NP-hard and this is within a few percent on DAGs like these).
"""

from ..memory import arenas as _arenas

ALIGN = 64


def _intervals(steps, internal):
    first, last = {}, {}
    for i, s in enumerate(steps):
        for t in s.inputs + s.outputs:
            sid = id(t._storage)
            if sid in internal:
                first.setdefault(sid, i)
                last[sid] = i
    return first, last


def place(sizes, first, last):
    """Offsets for buffers {id: nbytes} with lives [first[id], last[id]]; returns (offsets, total bytes)."""
    order = sorted(sizes, key=lambda k: (-sizes[k], first[k]))
    placed = []  # (offset, end, first, last)
    offsets = {}
    total = 0
    for k in order:
        size = (sizes[k] + ALIGN - 1) // ALIGN * ALIGN
        lo, hi = first[k], last[k]
        busy = sorted((o, e) for o, e, f, la in placed if not (la < lo or f > hi))
        off = 0
        for o, e in busy:
            if off + size <= o:
                break
            off = max(off, e)
        offsets[k] = off
        placed.append((off, off + size, lo, hi))
        total = max(total, off + size)
    return offsets, total


def plan_memory(tape, aliases):
    """Move the tape's internal intermediates into one persistent block; returns (block, bytes)."""
    arg_storages = {id(a._storage) for a in aliases}
    internal = {}
    for sid, st in tape.created.items():
        if st.arena is not None and st.arena.transient and sid not in arg_storages:
            internal[sid] = st
    if not internal:
        return None, 0
    first, last = _intervals(tape.steps, internal)
    live = {sid: st for sid, st in internal.items() if sid in first}
    # one block per device: a plan's GPU intermediates are laid out in GPU memory (_arenas.view_of)
    by_dev = {}
    for sid, st in live.items():
        by_dev.setdefault(getattr(st, "device_type", "cpu"), {})[sid] = st.nbytes
    views, blocks, total = {}, [], 0
    for dev, sizes in by_dev.items():
        offsets, nbytes = place(sizes, first, last)
        block = _arenas.persistent(dev).new(max(nbytes, 1))
        views.update({sid: _arenas.view_of(block, offsets[sid], sizes[sid]) for sid in sizes})
        blocks.append(block)
        total += nbytes
    block = blocks[0] if len(blocks) == 1 else tuple(blocks)
    for s in tape.steps:
        for t in s.inputs + s.outputs:
            v = views.get(id(t._storage))
            if v is not None:
                t._storage = v
                t._npcache = None
    return block, total
