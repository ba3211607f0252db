"""Containers: Sequential, ModuleList, ModuleDict (torch.nn's semantics: keys, indexing, repr)."""

import operator
from collections import OrderedDict
from itertools import chain, islice

from .module import Module, _indent


def _abs_index(idx, n, kind):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {kind} of length {n}")
    return idx % n


class Sequential(Module):
    """Modules called in order, each on the previous one's output.

    >>> model = plast.nn.Sequential(plast.nn.Linear(2, 8), plast.nn.ReLU(), plast.nn.Linear(8, 1))
    >>> model(plast.ones(4, 2)).shape
    plast.Size([4, 1])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        i = _abs_index(idx, len(self), "Sequential")
        return next(islice(self._modules.values(), i, None))

    def __setitem__(self, idx, module):
        i = _abs_index(idx, len(self), "Sequential")
        key = list(self._modules)[i]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                delattr(self, k)
        else:
            delattr(self, keys[_abs_index(idx, len(keys), "Sequential")])
        # torch renumbers the remaining keys so indexing stays contiguous
        items = list(self._modules.items())
        self._modules.clear()
        self._modules.update((str(i), m) for i, (_, m) in enumerate(items))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(
                f"add operator supports only objects of Sequential class, but {type(other)} is given."
            )
        out = Sequential()
        for m in chain(self, other):
            out.append(m)
        return out

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        self._modules.update((str(i), m) for i, m in enumerate(mods))
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules whose parameters the parent registers (indexable, iterable, appendable).

    >>> layers = plast.nn.ModuleList([plast.nn.Linear(3, 3) for _ in range(2)])
    >>> len(list(layers.parameters()))
    4
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_abs_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in list(self._modules)[idx]:
                delattr(self, k)
        else:
            delattr(self, str(_abs_index(idx, len(self), "ModuleList")))
        mods = list(self._modules.values())
        self._modules.clear()
        self._modules.update((str(i), m) for i, m in enumerate(mods))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        out = ModuleList()
        for m in chain(self, other):
            out.append(m)
        return out

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got " + type(modules).__name__
            )
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def __repr__(self):
        # consecutive identical children print once with their index range, as torch does: (0-2): 3 x Linear(...)
        items = [(k, repr(m)) for k, m in self._modules.items()]
        if not items:
            return self._get_name() + "()"
        lines, start = [], 0
        for i in range(1, len(items) + 1):
            if i == len(items) or items[i][1] != items[start][1]:
                rep = _indent(items[start][1], 2)
                if i - start == 1:
                    lines.append(f"({items[start][0]}): {rep}")
                else:
                    lines.append(f"({items[start][0]}-{items[i - 1][0]}): {i - start} x {rep}")
                start = i
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is not callable; iterate over it in your forward()")


class ModuleDict(Module):
    """A dict of modules (insertion ordered) whose parameters the parent registers.

    >>> heads = plast.nn.ModuleDict({"a": plast.nn.Linear(2, 2), "b": plast.nn.Tanh()})
    >>> list(heads.keys())
    ['a', 'b']
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        if hasattr(modules, "items"):
            for k, m in modules.items():
                self[k] = m
        else:
            for j, kv in enumerate(modules):
                if not isinstance(kv, (list, tuple)) or len(kv) != 2:
                    raise ValueError(
                        f"ModuleDict update sequence element #{j} should be a (key, module) pair, got {kv!r}"
                    )
                self[kv[0]] = kv[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is not callable; index it in your forward()")
