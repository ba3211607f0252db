"""Elementwise-chain fusion: a connected run of elementwise ops becomes one pass over memory.

Where the pattern rules (graph/fusion.py) match fixed shapes of graph, a chain is found by growing from a root
through producers whose outputs are internal (consumed only inside the chain, held by nobody, not saved for a
backward). The chain compiles to a register bytecode that csrc/elementwise_chain.c evaluates over L1-sized
tiles: loads with broadcast strides, the ops, one store. Intermediates never touch memory. On a CUDA device the
same program becomes the source of one generated kernel (kernels/cuda/codegen.py).
"""

from .._core import dtypes
from ..kernels.cpu import _fused

MAX_NODES = 12
MAX_REGS = 16
MAX_INPUTS = 15


class ChainRule:
    """Stands in for a Rule in plans and debug output."""

    name = "elementwise_chain"


RULE = ChainRule()


def _eligible(n):
    name = n.op.chain  # the row's opcode (ops/registry.py): None for ops chains don't take
    if name is None:
        return False
    shape, dt = n.specs[0]
    if dt not in (dtypes.float32, dtypes.float64) or len(n.specs) != 1:
        return False
    # CPU chains run in csrc/elementwise_chain.c; CUDA chains as a kernel generated from the same program, for the
    # ops the generator knows. Other devices stay unfused (one kernel per op).
    dev = n.device.type
    if dev == "cuda":
        from ..kernels.cuda import codegen

        if name not in codegen.SUPPORTED:
            return False
    elif dev != "cpu":
        return False
    return all(t.dtype is dt for t in n.inputs)


def grow(root, internal, covered):
    """Nodes of the chain rooted at `root` (topological order), or None when it would be a single node."""
    shape = root.specs[0][0]
    device = root.device
    members = {id(root): root}
    frontier = [root]
    while frontier and len(members) < MAX_NODES:
        n = frontier.pop()
        for t in n.inputs:
            p = t._node
            if (
                p is None
                or t._storage is not None
                or id(p) in members
                or id(p) in covered
                or p.done
                or (id(p), t._index) not in internal
                or not _eligible(p)
                or p.device != device
                or tuple(p.specs[0][0]) != tuple(shape)
                # eliding an output backward reads would mean recomputing it there
                or (p.needs_grad and p.op.reads_output)
            ):
                continue
            members[id(p)] = p
            frontier.append(p)
            if len(members) >= MAX_NODES:
                break
    if len(members) < 2:
        return None
    return members


def compile_chain(nodes_in_order):
    """(program bytes, external input tensors) for nodes given in topological order (the root last)."""
    member = {id(n) for n in nodes_in_order}
    reg_of = {}  # id(node) -> register holding its output
    ext = []  # external input tensors
    ext_reg = {}  # id(tensor) -> register it was loaded into
    last_use = {}
    for i, n in enumerate(nodes_in_order):
        for t in n.inputs:
            if t._node is not None and id(t._node) in member and t._storage is None:
                last_use[id(t._node)] = i
    prog = []
    free = list(range(MAX_REGS - 1, -1, -1))

    def operand(t):
        p = t._node
        if p is not None and id(p) in member and t._storage is None:
            return reg_of[id(p)]
        r = ext_reg.get(id(t))
        if r is None:
            if len(ext) >= MAX_INPUTS or not free:
                raise _TooBig
            r = free.pop()
            ext.append(t)
            ext_reg[id(t)] = r
            prog.append(("load", r, len(ext) - 1))
        return r

    for i, n in enumerate(nodes_in_order):
        srcs = [operand(t) for t in n.inputs]
        # registers of chain values whose last reader is this node can be reused for its result
        for t in n.inputs:
            p = t._node
            if p is not None and id(p) in member and t._storage is None and last_use.get(id(p)) == i:
                r = reg_of.get(id(p))
                if r is not None and r not in free:
                    free.append(r)
        if not free:
            raise _TooBig
        dst = free.pop()
        prog.append((n.op.chain, dst, *srcs))
        reg_of[id(n)] = dst
    prog.append(("store", 0, reg_of[id(nodes_in_order[-1])]))
    return _fused.assemble(prog), ext


class _TooBig(Exception):
    pass


def _device_kernel(root, inputs, outputs, args):
    """The chain on a CUDA device: one generated kernel (kernels/cuda/codegen.py)."""
    from ..kernels.cuda import codegen

    codegen.run_chain(args[0], outputs[0], inputs)


# The group kernel: the chain's program over the output's shape (csrc/elementwise_chain.c on the CPU, compiled
# with no Python in between; a generated kernel on a CUDA device).
kernel = _fused.ChainKernel(_device_kernel)


def find_chains(order, internal, covered):
    """Chain groups over `order` not already covered by pattern rules: {id(root): (nodes, inputs, program)}."""
    pos = {id(n): i for i, n in enumerate(order)}
    out = {}
    taken = set(covered)
    for root in reversed(order):
        if id(root) in taken or root.done or not _eligible(root):
            continue
        members = grow(root, internal, taken)
        if members is None:
            continue
        nodes = sorted(members.values(), key=lambda n: pos[id(n)])
        try:
            program, ext = compile_chain(nodes)
        except _TooBig:
            continue
        out[id(root)] = (nodes, ext, program)
        taken.update(id(n) for n in nodes if n is not root)
    return out
