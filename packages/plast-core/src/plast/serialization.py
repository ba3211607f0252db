"""plast.save / plast.load: state dicts in safetensors files, never pickle.

A file holds the tensors (made contiguous first: safetensors stores raw buffers) and, in its metadata, a JSON tree
of everything else: nested dicts (any string keys; int, float, bool and None keys too, as optimizer state uses),
lists, tuples and plain values (bool, int, float including inf/nan, str, None), with each tensor replaced by a
reference to its entry. Every such tree loads back exactly, container types included (a tuple stays a tuple). The
entries are named by their path (``model.w``), so PyTorch's ``safetensors.torch.load_file`` reads a plast file as
a flat ``{name: tensor}`` dict, and a file written by ``safetensors.torch.save_file`` loads here as a flat dict.

Devices follow torch.load: the tree records where each non-CPU tensor lived (``"device": "cuda"``), and load
puts each tensor back there unless ``map_location`` says otherwise (CudaUnavailableError, with the hint to pass
``map_location="cpu"``, where the GPU is missing). Tensors of files without that record (other tools' flat
files, plast files of CPU tensors) are on the CPU.

Integrity: plast writes (format ``plast.save/2``) a sha256 of the tensor data and one of the header (tensor
names, dtypes, shapes, offsets and all metadata) and load checks both, so a flipped bit anywhere in the file is a
CheckpointError. Files written by other tools, and by plast before format 2 (``plast.save/1``, still read), carry
no checksum: they are checked for consistency (offsets, sizes, types) but damage inside the tensor data can't be
seen. Writes to a path are atomic (temporary file in the same directory, fsync, rename); a damaged, truncated or
inconsistent file, or a path that is not a regular file, raises CheckpointError naming the file and the problem.

Whole objects (``plast.save(model, f)``, as torch.save): any other object is stored the way pickle would take it
apart (its ``__reduce_ex__(2)``: a callable, its arguments, its state, its items), written into the same JSON tree
(format ``plast.save/3``; files without objects stay format 2, byte for byte what they were), with shared objects
and cycles (a parameter in both ``_parameters`` and the module's ``__dict__``) kept as references and tensors
still in safetensors entries. Loading rebuilds them as torch.load(weights_only=True) does, never with pickle and
never running a callable the file names unless it is allowed: plast's own classes and functions, a few builtins
(OrderedDict, set, frozenset, complex, slice, range, copyreg's ``__newobj__`` for an allowed class), and what
the caller lists with ``safe_globals([...])`` / ``add_safe_globals([...])`` (torch.serialization's names, so
``torch.serialization.safe_globals([MyModel, torch.nn.Linear])`` works unchanged under plast.torch). Anything
else raises UnpicklingError naming it and the call that allows it; ``weights_only=False`` lifts nothing (a
file never runs code the caller did not allow; only plast's own modules are imported on demand, and of plast's
functions only the reconstructors of its own ``__reduce__`` methods are ever called). A tensor subclass (``nn.Parameter``) comes back as that class, with its requires_grad,
by setting its class on the loaded tensor (as ``copy.deepcopy`` does), never by calling its constructor.
"""

from __future__ import annotations

import collections
import contextlib
import copyreg
import enum
import hashlib
import importlib
import inspect
import io
import json
import math
import os
import pickle  # for its exception class only: torch code catches pickle.UnpicklingError
import stat
import sys
import tempfile
import types
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

import ml_dtypes
import numpy as np

from ._core._structs import TensorBase
from ._core.cuda_driver import CudaUnavailableError
from ._core.devices import Device, as_device, device
from ._core.errors import CheckpointError
from ._core.hints import DeviceLike
from .ops.creation import tensor

FORMAT = "plast.save/2"
FORMAT_OBJECTS = "plast.save/3"  # format 2's tree plus object, global and shared-reference nodes
_OLD_FORMATS = ("plast.save/1",)  # same tree language, no checksums
_CHECKED_FORMATS = (FORMAT, FORMAT_OBJECTS)
_TREE_KEY = "plast"
_PAYLOAD_SHA = "plast.payload_sha256"
_HEADER_SHA = "plast.header_sha256"
_RESERVED = ("format", _TREE_KEY, _PAYLOAD_SHA, _HEADER_SHA)
# safetensors' own reader refuses headers over 100 MB; the same bound keeps a hostile length from costing memory
_MAX_HEADER = 100 * 1024 * 1024
# deeper trees than this are refused both ways: a state dict is a few levels deep, and the bound keeps a hostile
# file (or a cyclic object) from reaching Python's recursion limit
MAX_DEPTH = 200

# safetensors dtype -> (numpy dtype, or None where plast has no such dtype; item size)
_ST_DTYPES: dict[str, tuple[Any, int]] = {
    "BOOL": (np.dtype(np.bool_), 1),
    "I32": (np.dtype("<i4"), 4),
    "I64": (np.dtype("<i8"), 8),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype(ml_dtypes.bfloat16), 2),
    "F32": (np.dtype("<f4"), 4),
    "F64": (np.dtype("<f8"), 8),
    "U8": (np.dtype(np.uint8), 1),
    "I8": (np.dtype(np.int8), 1),
    "F8_E5M2": (None, 1),
    "F8_E4M3": (None, 1),
    "F8_E8M0": (None, 1),
    "I16": (np.dtype("<i2"), 2),
    "U16": (None, 2),
    "U32": (None, 4),
    "U64": (None, 8),
    "C64": (None, 8),
}
_NP_TO_ST = {nd: code for code, (nd, _) in _ST_DTYPES.items() if nd is not None}


class _Bad(Exception):
    """A problem with the file's contents; load turns it into a CheckpointError naming the file."""


def _host_values(t):
    """t's values as a C-contiguous little-endian host array of t's shape: a CUDA tensor is copied down
    (``_np_array``), a strided view is packed. NOTE: np.ascontiguousarray would turn a 0-d array (BatchNorm's
    num_batches_tracked, an optimizer's step) into shape (1,), which then fails to load into the model."""
    a = np.require(t.detach()._np_array(), requirements="C")
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a


def _ref(key, t):
    """The tree's reference to tensor entry `key`, with t's device when it is not the CPU."""
    if t.device.type == "cpu":
        return {"__tensor__": key}
    return {"__tensor__": key, "device": str(t.device)}


def _entry_name(path, tensors):
    """A fresh entry name for the tensor at `path`: the path itself where it is free (so torch's flat view of the
    file reads ``model.w``), else the path with a counter. The tree stores the name, so names only need to be
    unique, never to be parsed back. Lone surrogates are escaped: safetensors' JSON parser rejects them."""
    base = path.encode("utf-8", "backslashreplace").decode("utf-8") if path else "tensor"
    name, i = base, 0
    while name in tensors or name == "__metadata__":
        i += 1
        name = f"{base}#{i}"
    return name


class UnpicklingError(pickle.UnpicklingError):
    """A file names a class or function that loading may not call (torch's pickle.UnpicklingError role: loading
    with weights_only refuses what is not on the allow-list). The message names it and how to allow it."""


# callables a file may name without being allowed: builtins that only build containers and numbers
_BUILTIN_GLOBALS = {
    "collections:OrderedDict": collections.OrderedDict,
    "builtins:set": set,
    "builtins:frozenset": frozenset,
    "builtins:complex": complex,
    "builtins:slice": slice,
    "builtins:range": range,
    "copyreg:__newobj__": copyreg.__newobj__,
}
_safe_globals: dict[str, Any] = {}  # name -> object, from add_safe_globals
_scoped_globals: list[dict[str, Any]] = []  # the `with safe_globals(...)` blocks now open


def _global_name(obj):
    """'module:qualname' of a class or function, as the file records it."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise TypeError(f"plast.save can't refer to {obj!r}: it has no __module__ and __qualname__")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise TypeError(
            f"plast.save can't refer to {module}.{qualname}: a lambda or a function defined inside another "
            "function has no name to find it by when loading (define it at a module's top level)"
        )
    return f"{module}:{qualname}"


def _allow_list(entries):
    out = {}
    for entry in entries:
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str):
            obj, name = entry  # torch's (object, "module.name") form
            out[name.replace(":", ".")] = obj
            out[_global_name(obj)] = obj
        else:
            out[_global_name(entry)] = entry
    return out


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allow plast.load to rebuild objects of these classes (and to call these functions) from now on, as
    torch.serialization.add_safe_globals. Entries are classes or functions, or (object, "module.name") pairs."""
    _safe_globals.update(_allow_list(safe_globals))


def get_safe_globals() -> list[Any]:
    """The classes and functions add_safe_globals has allowed."""
    return list({id(v): v for v in _safe_globals.values()}.values())


def clear_safe_globals() -> None:
    """Forget everything add_safe_globals allowed."""
    _safe_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: Iterable[Any]):
    """Allow these classes and functions for the loads inside the block (torch.serialization.safe_globals)."""
    _scoped_globals.append(_allow_list(safe_globals))
    try:
        yield
    finally:
        _scoped_globals.pop()


def _is_plast_module(module):
    return module == "plast" or module.startswith("plast.")


# plast functions a file may have called to rebuild an object: the reconstructors of plast's own __reduce__
# methods, which only look a value up or make an empty container. Any other plast function (plast.save, say) is
# never called for a file, though a file may name it as a value (a module's ``activation = F.relu``).
_PLAST_REBUILDERS = {"plast._core._dtype:_by_name", "plast.nn.module:_rebuild_members"}
# what loading may import for a file: the distributions' packages, each as `import plast.nn` does
_PLAST_ROOTS = ("plast.nn", "plast.optim", "plast.data", "plast.experiment")


def _lookup(name):
    """The class or function a file's 'module:qualname' names, as a value; UnpicklingError unless allowed:
    listed by safe_globals / add_safe_globals, a builtin of _BUILTIN_GLOBALS, or plast's own (whose modules are
    imported on demand; no other module ever is). There is no unsafe mode: load's `weights_only` never reaches
    here."""
    for table in (*reversed(_scoped_globals), _safe_globals, _BUILTIN_GLOBALS):
        if name in table:
            return table[name]
    module, _, qualname = name.partition(":")
    if not module or not qualname:
        raise _Bad(f"it names a global {name[:80]!r} that is not 'module:qualname'")
    shown = f"{module}.{qualname}"
    if not _is_plast_module(module):
        raise UnpicklingError(
            f"plast.load: the file holds {shown}, which loading may not use. If you trust the file, allow it: "
            f"`with plast.serialization.safe_globals([{qualname.split('.')[-1]}]): plast.load(...)` (or "
            "add_safe_globals; torch.serialization's names work the same under plast.torch). plast never "
            "unpickles, and weights_only=False does not lift this: a file never runs code you did not allow"
        )
    if module not in sys.modules:
        # a plast module not loaded yet: import its distribution as `import plast.nn` would, never the module
        # itself (a file naming plast.torch.__main__ or a launcher must not run it); then it must be loaded
        root = next((r for r in _PLAST_ROOTS if module == r or module.startswith(r + ".")), None)
        if root is not None:
            try:
                importlib.import_module(root)
            except ImportError:
                raise UnpicklingError(
                    f"plast.load: the file names {shown}, but {root} is not installed"
                ) from None
    obj = sys.modules.get(module)
    if obj is None:
        raise UnpicklingError(
            f"plast.load: the file names {shown}, but {module} is not a module `import plast` or the plast "
            f"distributions ({', '.join(_PLAST_ROOTS)}) load"
        )
    for part in qualname.split("."):
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            raise UnpicklingError(f"plast.load: the file names {shown}, which does not exist here")
    return obj


def _listed(name):
    """Whether the caller (safe_globals, add_safe_globals) or the builtin table allows `name`."""
    return any(name in table for table in (*_scoped_globals, _safe_globals, _BUILTIN_GLOBALS))


def _callable_allowed(name, fn):
    """Whether an object node may call `fn` (named `name`) to create its object."""
    if _listed(name):
        return True  # copyreg.__newobj__ among them: its class is checked where it is called
    if name in _PLAST_REBUILDERS:
        return True
    # a plast enum (Device): calling the class looks a member up by value; a plast container class (a module's
    # hook dict): what dict's and list's __reduce__ call, with no arguments, before the items are added
    return (
        isinstance(fn, type)
        and _is_plast_module(fn.__module__)
        and issubclass(fn, (enum.Enum, dict, list, set, frozenset, tuple))
    )


_MISSING = object()


def _is_global(obj):
    """A class, or a function or builtin that is not bound to an instance: stored by its name."""
    if isinstance(obj, type):
        return True
    if not inspect.isroutine(obj):
        return False
    owner = getattr(obj, "__self__", None)
    return owner is None or isinstance(owner, types.ModuleType)


class _Encoder:
    """Turns what save was given into the JSON tree, each tensor into an entry of `tensors`."""

    def __init__(self):
        self.tensors = {}
        self.objects = False  # whether an object, global or set node was written (format 3)
        self.memo = {}  # id(object or tensor inside an object) -> node id / entry name
        self.next_id = 0
        self.keep = []  # what the memo's ids belong to, alive until the end (an id is reused once freed)

    def encode(self, obj, path, depth=0, in_object=False):
        if depth > MAX_DEPTH:
            raise ValueError(
                f"plast.save: the object is nested deeper than {MAX_DEPTH} levels (a cycle?) at {path}"
            )
        if isinstance(obj, TensorBase):
            return self.tensor(obj, path, in_object)
        if type(obj) is dict or (isinstance(obj, dict) and not in_object):
            return self.dict(obj, path, depth, in_object)
        if type(obj) is tuple or (isinstance(obj, tuple) and not in_object):
            return {
                "__tuple__": [self.encode(v, f"{path}.{i}", depth + 1, in_object) for i, v in enumerate(obj)]
            }
        if type(obj) is list or (isinstance(obj, list) and not in_object):
            return [self.encode(v, f"{path}.{i}", depth + 1, in_object) for i, v in enumerate(obj)]
        if isinstance(obj, float) and not math.isfinite(obj):
            return {"__float__": repr(obj)}
        if obj is None or type(obj) in (bool, int, float, str):
            return obj
        if isinstance(obj, np.generic):
            return self.encode(obj.item(), path, depth, in_object)
        if isinstance(obj, (bool, int, float, str)):  # a subclass (an IntEnum member): keep its class
            return self.reduced(obj, path, depth)
        if _is_global(obj):
            self.objects = True
            return {"__global__": _global_name(obj)}
        if isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"plast.save can't store {type(obj).__name__} (at {path or 'the top level'}): store the data as a "
                "tensor (plast.tensor(numpy.frombuffer(b, numpy.uint8))); pickle is never used"
            )
        return self.reduced(obj, path, depth)

    def tensor(self, t, path, in_object):
        if in_object and id(t) in self.memo:
            return {"__tensor__": self.memo[id(t)], "again": True}
        key = _entry_name(path, self.tensors)
        self.tensors[key] = _host_values(t)
        node = _ref(key, t)
        if in_object:
            self.memo[id(t)] = key
            self.keep.append(t)
            if type(t).__module__ != "plast._tensor" or type(t).__name__ != "Tensor":
                node["cls"] = _global_name(type(t))
            if t.requires_grad:
                node["requires_grad"] = True
        return node

    def dict(self, obj, path, depth, in_object):
        if all(isinstance(k, str) for k in obj) and not any(k.startswith("__") for k in obj):
            return {
                k: self.encode(v, f"{path}.{k}" if path else k, depth + 1, in_object) for k, v in obj.items()
            }
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(
                    f"plast.save: dict keys must be str, int, float, bool or None, got {type(k).__name__}"
                )
            if isinstance(k, float) and not math.isfinite(k):
                raise ValueError(f"plast.save: a dict key is {k!r}; keys must be finite numbers")
            items.append([k, self.encode(v, f"{path}.{k}" if path else str(k), depth + 1, in_object)])
        return {"__dict__": items}

    def reduced(self, obj, path, depth):
        """An object as its __reduce_ex__(2) takes it apart: pickle's recipe, written as data."""
        self.objects = True
        if id(obj) in self.memo:
            ref = self.memo[id(obj)]
            if ref is None:
                raise ValueError(
                    f"plast.save: {type(obj).__name__} at {path} needs itself to be created (a cycle through "
                    "its constructor's arguments), which can't be stored"
                )
            return {"__again__": ref}
        where = path or "the top level"
        try:
            parts = obj.__reduce_ex__(2)
        except Exception as e:
            raise TypeError(
                f"plast.save can't store the {type(obj).__name__} at {where} ({e}); pickle is never used. For a "
                "model or an optimizer, plast.save(model.state_dict(), f) always works"
            ) from None
        if isinstance(parts, str) or not isinstance(parts, tuple) or not 2 <= len(parts) <= 6:
            raise TypeError(
                f"plast.save can't store the {type(obj).__name__} at {where} (it reduces to a name)"
            )
        parts = parts + (None,) * (6 - len(parts))
        fn, args, state, listitems, dictitems, setter = parts
        if setter is not None:
            raise TypeError(f"plast.save can't store the {type(obj).__name__} at {where} (a state setter)")
        self.keep.append(obj)
        self.memo[id(obj)] = None  # being created: a reference back to it now would be a cycle
        node = {"__reduce__": self.encode(fn, path, depth + 1, True)}
        node["args"] = self.encode(tuple(args), path, depth + 1, True)["__tuple__"]
        ref = self.memo[id(obj)] = self.next_id
        self.next_id += 1
        node["id"] = ref
        if listitems is not None:
            node["listitems"] = [
                self.encode(v, f"{path}.{i}", depth + 1, True) for i, v in enumerate(listitems)
            ]
        if dictitems is not None:
            node["dictitems"] = [
                [
                    self.encode(k, f"{path}.key", depth + 1, True),
                    self.encode(v, f"{path}.{k}", depth + 1, True),
                ]
                for k, v in dictitems
            ]
        if state is not None:
            node["state"] = self.encode(state, path, depth + 1, True)
        return node


def _encode(obj, tensors, path):
    """The tree of `obj` (format 2's language where obj holds no objects), its tensors put into `tensors`; and
    whether it needed format 3."""
    enc = _Encoder()
    enc.tensors = tensors
    return enc.encode(obj, path), enc.objects


class _Tree:
    """Decodes the metadata tree, checking every node's shape (the file may be hostile)."""

    def __init__(self, tensors, place, strict, objects=False):
        self.tensors, self.place, self.strict = tensors, place, strict
        self.done = {}  # entry name -> tensor (format 1 files may refer to an entry twice; see load)
        self.objects = objects  # format 3: object, global and shared-reference nodes may appear
        self.built = {}  # object node id -> the object (shared references and cycles)

    def decode(self, node, depth=0):
        if depth > MAX_DEPTH:
            raise _Bad(f"its structure is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, list):
            return [self.decode(v, depth + 1) for v in node]
        if not isinstance(node, dict):
            return node  # JSON leaves: str, int, float, bool, None
        if "__tensor__" in node:
            return self.tensor(node)
        if "__tuple__" in node:
            items = node["__tuple__"]
            if len(node) != 1 or not isinstance(items, list):
                raise _Bad("a tuple node is malformed")
            return tuple(self.decode(v, depth + 1) for v in items)
        if "__dict__" in node:
            items = node["__dict__"]
            if len(node) != 1 or not isinstance(items, list):
                raise _Bad("a dict node is malformed")
            out = {}
            for item in items:
                if not (isinstance(item, list) and len(item) == 2):
                    raise _Bad("a dict node's items must be [key, value] pairs")
                k, v = item
                if isinstance(k, (list, dict)):
                    raise _Bad(f"a dict key is a JSON {type(k).__name__}")
                out[k] = self.decode(v, depth + 1)
            return out
        if "__float__" in node:
            text = node["__float__"]
            if len(node) != 1 or not isinstance(text, str):
                raise _Bad("a float node is malformed")
            try:
                return float(text)
            except ValueError:
                raise _Bad(f"a float node holds {text[:40]!r}, not a number") from None
        if self.objects and "__global__" in node:
            name = node["__global__"]
            if len(node) != 1 or not isinstance(name, str):
                raise _Bad("a global node is malformed")
            return _lookup(name)
        if self.objects and "__again__" in node:
            ref = node["__again__"]
            if len(node) != 1 or type(ref) is not int or ref not in self.built:
                raise _Bad("a shared-object reference is malformed or points forward")
            return self.built[ref]
        if self.objects and "__reduce__" in node:
            return self.rebuild(node, depth)
        for k in node:
            if k.startswith("__"):
                raise _Bad(f"its structure has an unknown marker {k[:40]!r}")
        return {k: self.decode(v, depth + 1) for k, v in node.items()}

    def rebuild(self, node, depth):
        """pickle's REDUCE, APPENDS, SETITEMS and BUILD over an object node, calling only allowed callables."""
        known = {"__reduce__", "args", "id", "listitems", "dictitems", "state"}
        if (
            not set(node) <= known
            or not isinstance(node.get("args"), list)
            or type(node.get("id")) is not int
        ):
            raise _Bad("an object node is malformed")
        if node["id"] in self.built or node["id"] != len(self.built):
            raise _Bad("an object node's id is out of sequence")
        ctor = node["__reduce__"]
        if not (
            isinstance(ctor, dict) and set(ctor) == {"__global__"} and isinstance(ctor["__global__"], str)
        ):
            raise _Bad("an object node's constructor is not a global")
        fn = _lookup(ctor["__global__"])
        if not _callable_allowed(ctor["__global__"], fn):
            raise UnpicklingError(
                f"plast.load: the file would call {ctor['__global__'].replace(':', '.')} to rebuild an object, "
                "and loading calls only constructors it knows to be safe or that safe_globals allowed"
            )
        args = [self.decode(a, depth + 1) for a in node["args"]]
        if fn is copyreg.__newobj__:
            # cls.__new__(cls, *args): decoding args[0] (a global node) looked the class up; one of plast's own
            # classes is created only where its __new__ is object's (no code of its own: an extension type's
            # __cinit__ may allocate, a tensor class's __new__ builds storage); the caller's allowed ones always
            if not args or not isinstance(args[0], type):
                raise _Bad("an object node creates something that is not a class")
            cls = args[0]
            if cls.__new__ is not object.__new__ and not _listed(_global_name(cls)):
                raise UnpicklingError(
                    f"plast.load: the file would create a {cls.__module__}.{cls.__qualname__} through its own "
                    "__new__, which loading calls only for classes safe_globals allowed"
                )
        if not callable(fn):
            raise _Bad("an object node's constructor is not callable")
        try:
            obj = fn(*args)
        except Exception as e:
            raise _Bad(
                f"rebuilding a {getattr(fn, '__qualname__', fn)!r} failed ({type(e).__name__}: {e})"
            ) from e
        self.built[node["id"]] = obj
        if "listitems" in node:
            items = node["listitems"]
            if not isinstance(items, list):
                raise _Bad("an object node's list items are malformed")
            for v in items:
                obj.append(self.decode(v, depth + 1))
        if "dictitems" in node:
            items = node["dictitems"]
            if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 for i in items):
                raise _Bad("an object node's dict items are malformed")
            for k, v in items:
                key = self.decode(k, depth + 1)
                try:
                    obj[key] = self.decode(v, depth + 1)
                except TypeError as e:
                    raise _Bad(f"an object node's dict items don't fit it ({e})") from None
        if "state" in node:
            self.set_state(obj, self.decode(node["state"], depth + 1))
        return obj

    @staticmethod
    def set_state(obj, state):
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
            return
        slots = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
        if state:
            if not isinstance(state, dict) or not hasattr(obj, "__dict__"):
                raise _Bad(f"the state of a {type(obj).__name__} is malformed")
            obj.__dict__.update(state)
        if slots:
            if not isinstance(slots, dict):
                raise _Bad(f"the slot state of a {type(obj).__name__} is malformed")
            for k, v in slots.items():
                object.__setattr__(obj, k, v)  # a slot's descriptor, without the class's own __setattr__

    def tensor(self, node):
        key, loc = node["__tensor__"], node.get("device", "cpu")
        extra = {"again", "cls", "requires_grad"} if self.objects else set()
        if (
            not isinstance(key, str)
            or not isinstance(loc, str)
            or not set(node) <= {"__tensor__", "device", *extra}
        ):
            raise _Bad("a tensor reference is malformed")
        if key not in self.tensors:
            raise _Bad(f"its metadata refers to a tensor {key[:80]!r} it does not hold")
        again = node.get("again", False) is True
        if key in self.done:
            if self.strict and not again:
                raise _Bad(f"its metadata refers to tensor {key[:80]!r} twice")
            return self.done[key]
        if again:
            raise _Bad(f"its metadata refers back to tensor {key[:80]!r} before it is loaded")
        out = self.place(self.tensors[key], loc)
        if "cls" in node:
            cls = _lookup(node["cls"]) if isinstance(node["cls"], str) else None
            if not (isinstance(cls, type) and issubclass(cls, TensorBase)):
                raise _Bad(f"tensor {key[:80]!r} has a class that is not a tensor class")
            if type(out) is not cls:
                out.__class__ = cls  # as Tensor.__deepcopy__ does: the subclass's constructor never runs
        if node.get("requires_grad") is True:
            out.requires_grad_(True)
        self.done[key] = out
        return out


def _saved_device(location):
    try:
        return as_device(location)
    except (TypeError, ValueError) as e:
        raise _Bad(f"the file records an unknown device {location!r} ({e})") from e


def _devlike(x):
    """torch.device objects (map_location=torch.device("cpu") in ported code) by their name."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "type"):
        return str(x)
    return x


def _placer(map_location):
    """place(host array, saved location) -> tensor, by torch.load's rules for `map_location`: None keeps the
    saved device; a device (or its name) takes everything there; a dict maps saved locations ("cuda", "cuda:0",
    "cpu") to devices and keeps the others; a callable f(cpu_tensor, location) returns the tensor to use, or
    None for the saved device."""
    map_location = _devlike(map_location)

    def restore(arr, dev, saved):
        if dev.type == "cuda":
            try:
                return tensor(arr, device=dev)
            except CudaUnavailableError as e:
                if not saved:
                    raise
                # as torch.load: the file wants a GPU this process can't use, and says how to load it anyway
                raise CudaUnavailableError(
                    f"plast.load: the file holds CUDA tensors, but {e}. If you are running on a CPU-only "
                    "machine, use plast.load(path, map_location='cpu') to load them onto the CPU."
                ) from None
        return tensor(arr)

    if map_location is None:
        return lambda arr, loc: restore(arr, _saved_device(loc), True)
    if isinstance(map_location, dict):
        table = {as_device(_devlike(k)): as_device(_devlike(v)) for k, v in map_location.items()}

        def from_table(arr, loc):
            saved = _saved_device(loc)
            dev = table.get(saved)
            return restore(arr, saved, True) if dev is None else restore(arr, dev, False)

        return from_table
    if isinstance(map_location, (str, device, Device)):
        dev = as_device(map_location)
        return lambda arr, loc: restore(arr, dev, False)
    if callable(map_location):

        def call(arr, loc):
            saved = _saved_device(loc)
            out = map_location(tensor(arr), str(saved))
            if out is None:
                return restore(arr, saved, True)
            if not isinstance(out, TensorBase):
                raise TypeError(
                    f"plast.load: map_location returned {type(out).__name__}; it must return a tensor or None"
                )
            return out

        return call
    raise TypeError(
        "plast.load: map_location must be None, a device ('cpu', 'cuda', plast.device(...)), a dict from saved "
        f"locations to devices, or a callable (tensor, location) -> tensor; got {type(map_location).__name__}"
    )


# ---- the safetensors container ----------------------------------------------------------------------------


def _header_digest(entries, meta):
    """sha256 of everything the header says except the digest itself, in a canonical form (so a flip that
    leaves the parsed header unchanged, such as the case of a hex digit in a \\u escape, changes nothing)."""
    body = {"tensors": entries, "metadata": {k: v for k, v in meta.items() if k != _HEADER_SHA}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _serialize(tensors, meta):
    """(header bytes, [uint8 arrays of the data]) of a safetensors file holding `tensors` and `meta`."""
    # as safetensors.save_file: widest items first, so each tensor's data is aligned to its item size
    order = sorted(tensors, key=lambda n: (-tensors[n].dtype.itemsize, n))
    entries, chunks, offset, payload = {}, [], 0, hashlib.sha256()
    for name in order:
        arr = tensors[name]
        code = _NP_TO_ST.get(arr.dtype)
        if code is None:
            raise TypeError(
                f"plast.save: tensor {name!r} has numpy dtype {arr.dtype}, which plast can't store"
            )
        raw = arr.reshape(-1).view(np.uint8)
        entries[name] = {
            "dtype": code,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + raw.nbytes],
        }
        payload.update(raw)
        chunks.append(raw)
        offset += raw.nbytes
    meta = dict(meta)
    meta[_PAYLOAD_SHA] = payload.hexdigest()
    meta[_HEADER_SHA] = _header_digest(entries, meta)
    text = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )
    text += b" " * (-len(text) % 8)  # as safetensors: the data starts 8-byte aligned
    return len(text).to_bytes(8, "little") + text, chunks


def _write_to(f, header, chunks):
    f.write(header)
    for c in chunks:
        f.write(memoryview(c))


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Bad(f"its header names {k[:80]!r} twice")
        out[k] = v
    return out


def _is_count(x):
    return type(x) is int and x >= 0


def _parse(data):
    """(metadata, {name: host array}) of safetensors bytes, every field checked; raises _Bad."""
    n = len(data)
    if n < 8:
        raise _Bad(f"it is {n} bytes long, too short for a safetensors header")
    hlen = int.from_bytes(data[:8], "little")
    if hlen > n - 8:
        raise _Bad(
            f"its header length is {hlen} bytes, but the file has only {n - 8} bytes after it (truncated?)"
        )
    if hlen > _MAX_HEADER:
        raise _Bad(f"its header length is {hlen} bytes, over the {_MAX_HEADER}-byte limit")
    try:
        header = json.loads(bytes(data[8 : 8 + hlen]).decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise _Bad(f"its header is not valid JSON ({e})") from None
    except RecursionError:
        raise _Bad("its header is nested too deeply") from None
    if not isinstance(header, dict):
        raise _Bad(f"its header is a JSON {type(header).__name__}, not an object")
    meta = header.pop("__metadata__", None)
    meta = {} if meta is None else meta
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _Bad("its __metadata__ must map strings to strings")
    payload = memoryview(data)[8 + hlen :]
    spans, arrays = [], {}
    for name, info in header.items():
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise _Bad(f"tensor {name[:80]!r} needs dtype, shape and data_offsets")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or code not in _ST_DTYPES:
            raise _Bad(f"tensor {name[:80]!r} has an unknown dtype {str(code)[:40]!r}")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise _Bad(f"tensor {name[:80]!r} has a bad shape (not a list of non-negative ints)")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
            raise _Bad(f"tensor {name[:80]!r} has bad data_offsets (not two non-negative ints)")
        start, end = offsets
        npdt, size = _ST_DTYPES[code]
        if start > end or end - start != math.prod(shape) * size:
            raise _Bad(f"tensor {name[:80]!r}: data_offsets {offsets} don't fit shape {shape[:8]} of {code}")
        spans.append((start, end, name))
        arrays[name] = (npdt, code, shape, start, end)
    at = 0
    for start, end, name in sorted(spans):
        if start != at:
            what = "overlaps another" if start < at else "leaves a gap before it"
            raise _Bad(f"tensor {name[:80]!r}'s data (bytes {start}..{end}) {what}")
        at = end
    if at != len(payload):
        raise _Bad(f"its tensors cover {at} bytes of data, but the file holds {len(payload)} (truncated?)")
    return meta, header, payload, arrays


def _materialize(arrays, payload):
    out = {}
    for name, (npdt, code, shape, start, end) in arrays.items():
        if npdt is None:
            raise _Bad(f"tensor {name[:80]!r} has dtype {code}, which plast has no equivalent for")
        count = (end - start) // npdt.itemsize
        out[name] = np.frombuffer(payload, npdt, count, start).reshape(shape)
    return out


def _read_path(path):
    """The bytes of the regular file at `path`; never blocks on a FIFO or device."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CheckpointError(f"plast.load: no such file: {path}") from None
    except OSError as e:
        raise CheckpointError(f"plast.load: cannot read {path} ({e.strerror or e})") from None
    _require_regular(path, st.st_mode)
    try:
        # O_NONBLOCK: if the path became a FIFO since the stat, the open returns at once instead of waiting
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise CheckpointError(f"plast.load: cannot open {path} ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        _require_regular(path, os.fstat(fd).st_mode)
        try:
            return f.read()
        except OSError as e:
            raise CheckpointError(f"plast.load: cannot read {path} ({e.strerror or e})") from None


def _require_regular(path, mode):
    if stat.S_ISREG(mode):
        return
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    kind = next((k for test, k in kinds.items() if test(mode)), "not a regular file")
    raise CheckpointError(f"plast.load: {path} is {kind}, not a regular file")


def _atomic_write(path, write):
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".plast-save-", dir=d)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _is_file_object(f):
    return hasattr(f, "write") or hasattr(f, "read")


def _utf8(s, what):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"plast.save: metadata {what} {s[:40]!r} is not valid UTF-8 (a lone surrogate?)"
        ) from None
    return s


def save(
    obj: Any,
    f: str | os.PathLike[str] | IO[bytes],
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Save a tensor or a (nested) state dict in safetensors format to `f`: a path (written atomically) or a
    binary file object open for writing (``io.BytesIO``, ``open(p, "wb")``; written at its position).

    `obj` is a tensor, or dicts, lists and tuples of tensors, numbers, strings and None, as nested as needed
    (``{"model": model.state_dict(), "optim": optimizer.state_dict(), "epoch": 3}``): the portable kind of
    file, which other safetensors readers see as a flat dict. A whole object (``plast.save(model, f)``, as
    torch.save) is stored too, as its pickle recipe written in JSON (see the module docstring); loading it needs
    its classes allowed (``safe_globals``), and a state dict stays the better checkpoint. `metadata` adds string
    entries that ``load(..., with_metadata=True)`` returns.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> plast.save({"w": plast.ones(2)}, p)
    >>> plast.load(p)["w"].tolist()
    [1.0, 1.0]
    """
    tensors = {}
    tree, objects = _encode(obj, tensors, "")
    fmt = FORMAT_OBJECTS if objects else FORMAT
    meta = {"format": fmt, _TREE_KEY: json.dumps(tree, allow_nan=False, ensure_ascii=True)}
    if metadata:
        for k, v in metadata.items():
            if str(k) in _RESERVED:
                raise ValueError(f"plast.save: metadata key {k!r} is reserved")
            meta[_utf8(str(k), "key")] = _utf8(str(v), "value")
    header, chunks = _serialize(tensors, meta)
    if _is_file_object(f):
        if not hasattr(f, "write"):
            raise TypeError(f"plast.save: {type(f).__name__} has no write(); pass a path or a writable file")
        if isinstance(f, io.TextIOBase):
            raise TypeError("plast.save: the file is open in text mode; open it in binary mode ('wb')")
        _write_to(f, header, chunks)
        return

    def write(tmp):
        with open(tmp, "wb") as out:
            _write_to(out, header, chunks)

    _atomic_write(f, write)


def load(
    f: str | os.PathLike[str] | IO[bytes],
    map_location: DeviceLike | Mapping[str, DeviceLike] | Callable[..., Any] | None = None,
    *,
    weights_only: bool | None = None,
    with_metadata: bool = False,
) -> Any:
    """Load what plast.save wrote (or a flat safetensors file, e.g. from ``safetensors.torch.save_file``) from
    `f`: a path to a regular file, or a binary file object open for reading (read from its position to its end).

    Tensors come back as leaves in persistent memory, each on the device it was saved from (as torch.load does)
    unless `map_location` moves it: a device such as ``"cpu"``, ``"cuda:0"``, ``plast.device(...)`` or a
    ``torch.device``, a dict from saved locations to devices (``{"cuda:0": "cpu"}``), or a callable
    ``f(cpu_tensor, location)`` returning the tensor to use (or None for the saved device). CUDA tensors without
    a usable GPU raise CudaUnavailableError.

    Loading never executes code from the file, and never unpickles. A file holding whole objects (a module
    saved with ``plast.save(model, f)``) is rebuilt calling only plast's own classes and functions, a few
    container builtins, and what ``safe_globals`` / ``add_safe_globals`` allow (UnpicklingError names anything
    else, whatever ``weights_only`` says: it is accepted for torch.load compatibility and lifts nothing).

    Files from plast's current format carry sha256 checksums of their header and data, and any mismatch (a
    flipped bit, a truncated copy) raises CheckpointError; files from other tools and older plast files carry
    none, so only their structure can be checked. A path that is a directory, FIFO or device raises
    CheckpointError at once. `with_metadata=True` returns ``(obj, metadata)``, the metadata being the extra
    entries given to plast.save (or another tool's ``__metadata__``).
    """
    del weights_only  # accepted for torch.load: every load is the safe kind (see above)
    place = _placer(map_location)
    if _is_file_object(f):
        if not hasattr(f, "read"):
            raise TypeError(f"plast.load: {type(f).__name__} has no read(); pass a path or a readable file")
        name = str(getattr(f, "name", None) or f"<{type(f).__name__}>")
        if isinstance(f, io.TextIOBase):
            raise TypeError(f"plast.load: {name} is open in text mode; open the file in binary mode ('rb')")
        data = f.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"plast.load: {name} returned {type(data).__name__}; open the file in binary mode"
            )
    else:
        name = os.fspath(f)
        data = _read_path(name)
    try:
        out, meta = _load_bytes(data, place)
    except _Bad as e:
        raise CheckpointError(f"plast.load: {name}: {e}") from None
    if with_metadata:
        # plast's own entries are not the caller's; another tool's file keeps all of its own
        if _TREE_KEY in meta:
            meta = {k: v for k, v in meta.items() if k not in _RESERVED}
        return out, meta
    return out


def _load_bytes(data, place):
    meta, entries, payload, arrays = _parse(data)
    fmt = meta.get("format")
    plast_keys = [k for k in (_TREE_KEY, _PAYLOAD_SHA, _HEADER_SHA) if k in meta]
    if fmt in _CHECKED_FORMATS:
        if len(plast_keys) != 3:
            raise _Bad(
                f"it says {FORMAT} but lacks {set((_TREE_KEY, _PAYLOAD_SHA, _HEADER_SHA)) - set(plast_keys)}"
            )
        if meta[_HEADER_SHA] != _header_digest(entries, meta):
            raise _Bad("its header does not match its sha256 checksum (corrupt)")
        if meta[_PAYLOAD_SHA] != hashlib.sha256(payload).hexdigest():
            raise _Bad("its tensor data does not match its sha256 checksum (corrupt)")
    elif fmt in _OLD_FORMATS:
        if _TREE_KEY not in meta:
            raise _Bad(f"it says {fmt} but has no structure entry")
    elif isinstance(fmt, str) and fmt.startswith("plast.save/"):
        raise _Bad(
            f"it is in format {fmt[:40]!r}, which this plast can't read (it reads {FORMAT_OBJECTS} and older)"
        )
    elif plast_keys:
        raise _Bad("it has plast metadata but no plast format entry (corrupt?)")
    tensors = _materialize(arrays, payload)
    if _TREE_KEY not in meta:  # another tool's flat file (its "format" is its own, e.g. "pt")
        return {k: place(v, "cpu") for k, v in tensors.items()}, meta
    try:
        tree = json.loads(meta[_TREE_KEY])
    except ValueError as e:
        raise _Bad(f"its structure entry is not valid JSON ({e})") from None
    except RecursionError:
        raise _Bad("its structure entry is nested too deeply") from None
    # format 1's namer could give two tensors one entry (the later overwrote the earlier), so its files may
    # refer to an entry twice; format 2 names are unique and each is referred to exactly once
    decoder = _Tree(
        tensors,
        place,
        strict=fmt in _CHECKED_FORMATS,
        objects=fmt == FORMAT_OBJECTS,
    )
    out = decoder.decode(tree)
    if fmt in _CHECKED_FORMATS and len(decoder.done) != len(tensors):
        raise _Bad("it holds tensors its structure does not refer to")
    return out, meta


__all__ = [
    "save",
    "load",
    "safe_globals",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "UnpicklingError",
]
