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
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
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
_OLD_FORMATS = ("plast.save/1",)  # same tree language, no checksums
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


def _unstorable(obj, path):
    where = path or "the top level"
    hint = ""
    if callable(getattr(obj, "state_dict", None)):
        hint = (
            "; save its state dict instead: plast.save(model.state_dict(), f) or "
            "plast.save(optimizer.state_dict(), f), and restore it with load_state_dict(plast.load(f))"
        )
    return TypeError(
        f"plast.save can store tensors, dicts, lists, tuples, numbers, strings and None; got {type(obj).__name__} "
        f"at {where} (pickle is never used, so arbitrary objects can't be saved){hint}"
    )


def _encode(obj, tensors, path, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError(
            f"plast.save: the object is nested deeper than {MAX_DEPTH} levels (a cycle?) at {path}"
        )
    if isinstance(obj, TensorBase):
        key = _entry_name(path, tensors)
        tensors[key] = _host_values(obj)
        return _ref(key, obj)
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not any(k.startswith("__") for k in obj):
            return {k: _encode(v, tensors, f"{path}.{k}" if path else k, depth + 1) for k, v in obj.items()}
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(
                    f"plast.save: dict keys must be str, int, float, bool or None, got {type(k).__name__}"
                )
            if isinstance(k, float) and not math.isfinite(k):
                raise ValueError(f"plast.save: a dict key is {k!r}; keys must be finite numbers")
            items.append([k, _encode(v, tensors, f"{path}.{k}" if path else str(k), depth + 1)])
        return {"__dict__": items}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, f"{path}.{i}", depth + 1) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{path}.{i}", depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return _encode(obj.item(), tensors, path, depth)
    raise _unstorable(obj, path)


class _Tree:
    """Decodes the metadata tree, checking every node's shape (the file may be hostile)."""

    def __init__(self, tensors, place, strict):
        self.tensors, self.place, self.strict = tensors, place, strict
        self.done = {}  # entry name -> tensor (format 1 files may refer to an entry twice; see load)

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
        for k in node:
            if k.startswith("__"):
                raise _Bad(f"its structure has an unknown marker {k[:40]!r}")
        return {k: self.decode(v, depth + 1) for k, v in node.items()}

    def tensor(self, node):
        key, loc = node["__tensor__"], node.get("device", "cpu")
        if not isinstance(key, str) or not isinstance(loc, str) or not set(node) <= {"__tensor__", "device"}:
            raise _Bad("a tensor reference is malformed")
        if key not in self.tensors:
            raise _Bad(f"its metadata refers to a tensor {key[:80]!r} it does not hold")
        if key in self.done:
            if self.strict:
                raise _Bad(f"its metadata refers to tensor {key[:80]!r} twice")
            return self.done[key]
        out = self.done[key] = self.place(self.tensors[key], loc)
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
    (``{"model": model.state_dict(), "optim": optimizer.state_dict(), "epoch": 3}``). A module or an optimizer
    itself can't be saved (that would need pickle): save its ``state_dict()``. `metadata` adds string entries
    that ``load(..., with_metadata=True)`` returns.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> plast.save({"w": plast.ones(2)}, p)
    >>> plast.load(p)["w"].tolist()
    [1.0, 1.0]
    """
    tensors = {}
    tree = _encode(obj, tensors, "")
    meta = {"format": FORMAT, _TREE_KEY: json.dumps(tree, allow_nan=False, ensure_ascii=True)}
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

    Loading never executes code from the file: plast never pickles, so ``weights_only`` is accepted for
    torch.load compatibility and both values mean the same safe load.

    Files from plast's current format carry sha256 checksums of their header and data, and any mismatch (a
    flipped bit, a truncated copy) raises CheckpointError; files from other tools and older plast files carry
    none, so only their structure can be checked. A path that is a directory, FIFO or device raises
    CheckpointError at once. `with_metadata=True` returns ``(obj, metadata)``, the metadata being the extra
    entries given to plast.save (or another tool's ``__metadata__``).
    """
    del weights_only  # nothing to unpickle: every load is the weights-only kind
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
    if fmt == FORMAT:
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
        raise _Bad(f"it is in format {fmt[:40]!r}, which this plast can't read (it reads {FORMAT} and older)")
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
    decoder = _Tree(tensors, place, strict=fmt == FORMAT)
    out = decoder.decode(tree)
    if fmt == FORMAT and len(decoder.done) != len(tensors):
        raise _Bad("it holds tensors its structure does not refer to")
    return out, meta


__all__ = ["save", "load"]
