"""Fusion rules as data (DESIGN §2.4): pattern -> replacement, composable with ``+``.

A pattern is a tree of op names with capture names at its leaves; it matches a node of the scheduled graph whose
inputs were produced by nodes of the named ops, and so on down. A rule fires only where every intermediate the
pattern covers is *internal*: consumed by exactly one node of this graph, not held by anyone else (user code,
autograd), and not a value some backward rule will read. The replacement is one kernel call that computes the
root's outputs from the captured inputs; the intermediates are never materialized.

``PLAST_FUSION=0`` turns fusion off; results agree either way (tests check each rule both ways).
"""

from ._graph import fusion_enabled


class Pat:
    """An op-name pattern: ``Pat("relu", Pat("add", Pat("matmul", "a", "w"), "bias"))``."""

    __slots__ = ("op", "children", "when")

    def __init__(self, op, *children, when=None):
        self.op = op
        self.children = children
        self.when = when  # optional predicate on the matched node

    def __repr__(self):
        inner = ", ".join(repr(c) if isinstance(c, Pat) else c for c in self.children)
        return f"{self.op}({inner})"


class Rule:
    """pattern -> replacement. ``build(captures, root) -> (kernel, inputs, args)`` returns the fused kernel, the
    tensors it reads (in order) and hashable arguments."""

    __slots__ = ("name", "pattern", "build")

    def __init__(self, name, pattern, build):
        self.name = name
        self.pattern = pattern
        self.build = build

    def __add__(self, other):
        return RuleSet([self]) + other

    def __repr__(self):
        return f"<Rule {self.name}: {self.pattern!r}>"


class RuleSet:
    __slots__ = ("rules",)

    def __init__(self, rules=()):
        self.rules = list(rules)

    def __add__(self, other):
        if isinstance(other, Rule):
            return RuleSet(self.rules + [other])
        return RuleSet(self.rules + list(other.rules))

    def __iter__(self):
        return iter(self.rules)

    def __len__(self):
        return len(self.rules)


RULES = RuleSet()


_FIRST_LEVEL = {}  # root op -> op names of pattern children directly under it


def register_rules(*rules):
    global RULES
    for r in rules:
        RULES = RULES + r
        kids = {c.op for c in r.pattern.children if isinstance(c, Pat)}
        _FIRST_LEVEL.setdefault(r.pattern.op, set()).update(kids)


def _device_type(node):
    dev = node.device
    return "cpu" if dev is None else dev.type


def may_fuse(order):
    """Cheap pre-check: does any node look like the top of a rule's pattern? (Saves planning small graphs.)"""
    for n in order:
        if not _device_fuses(_device_type(n)):
            continue
        kids = _FIRST_LEVEL.get(n.op.name)
        if kids:
            for t in n.inputs:
                p = t._node
                if p is not None and t._storage is None and p.op.name in kids:
                    return True
    return False


enabled = fusion_enabled  # PLAST_FUSION=0 turns the rules off (compiled: read on every realize)


# ---- devices ---------------------------------------------------------------------------------------------------
# The rules' builds return CPU kernels. A group of CUDA nodes takes its rule's CUDA kernel instead (the backend's
# FUSED_RULES, by rule name) through a twin Rule whose build swaps the kernel: plans cache the twin, so a plan-cache
# hit rebuilds the group with the CUDA kernel too. A rule with no kernel for a device leaves that device unfused.

_DEVICE_RULES = {}  # (rule, device type) -> twin Rule, or None when the device has no kernel


def _device_kernels(dev_type):
    """{rule name: fused kernel} of a non-CPU device."""
    if dev_type == "cuda":
        from ..kernels.cuda.kernels_nn import FUSED_RULES

        return FUSED_RULES
    return {}


def _device_fuses(dev_type):
    return dev_type == "cpu" or bool(_device_kernels(dev_type))


def _rule_for(rule, dev_type):
    """`rule` itself on the CPU; its twin with the device's kernel elsewhere; None when the device has none."""
    if dev_type == "cpu":
        return rule
    key = (rule, dev_type)
    if key not in _DEVICE_RULES:
        kernel = _device_kernels(dev_type).get(rule.name)
        if kernel is None:
            _DEVICE_RULES[key] = None
        else:

            def build(caps, root, _build=rule.build, _kernel=kernel):
                built = _build(caps, root)
                if built is None:
                    return None
                _, inputs, args = built
                return _kernel, inputs, args

            _DEVICE_RULES[key] = Rule(rule.name, rule.pattern, build)
    return _DEVICE_RULES[key]


class Group:
    """Nodes replaced by one fused kernel. `nodes` are in topological order; the last is the root."""

    __slots__ = ("rule", "nodes", "kernel", "inputs", "args")

    def __init__(self, rule, nodes, kernel, inputs, args):
        self.rule = rule
        self.nodes = nodes
        self.kernel = kernel
        self.inputs = inputs
        self.args = args


def _match(pat, node, internal, caps, covered):
    if node.op.name != pat.op or len(node.inputs) != len(pat.children) or node.done:
        return False
    if pat.when is not None and not pat.when(node):
        return False
    for child, t in zip(pat.children, node.inputs):
        if isinstance(child, str):
            if child in caps and caps[child] is not t:
                return False
            caps[child] = t
            continue
        prod = t._node
        if prod is None or t._storage is not None or (id(prod), t._index) not in internal:
            return False
        if not _match(child, prod, internal, caps, covered):
            return False
        covered.append(prod)
    return True


def find_groups(order, internal, rules=None):
    """Fused groups over `order` (topological). Returns {id(root node): Group} and the set of covered node ids."""
    rules = RULES if rules is None else rules
    groups = {}
    covered_ids = set()
    # NOTE: roots are tried from the end so the largest pattern containing a node wins over smaller ones.
    for node in reversed(order):
        if id(node) in covered_ids:
            continue
        dev_type = _device_type(node)
        for rule in rules:
            caps, covered = {}, []
            if _match(rule.pattern, node, internal, caps, covered):
                if any(id(n) in covered_ids for n in covered):
                    continue
                if any(_device_type(n) != dev_type for n in covered):
                    continue  # never one kernel across devices
                dev_rule = _rule_for(rule, dev_type)
                if dev_rule is None:
                    continue  # no fused kernel on this device: its nodes run one by one
                built = dev_rule.build(caps, node)
                if built is None:
                    continue
                kernel, inputs, args = built
                nodes = sorted(covered, key=order.index) + [node]
                groups[id(node)] = Group(dev_rule, nodes, kernel, inputs, args)
                covered_ids.update(id(n) for n in covered)
                break
    return groups, covered_ids
