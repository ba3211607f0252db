"""plast.save / plast.load: state dicts in safetensors, never pickle.

A file holds the tensors (made contiguous first: safetensors writes raw buffers) and, in its metadata, a JSON tree
of everything else: nested dicts (any JSON-able keys, ints included, as optimizer state uses), lists, tuples and
plain values, with each tensor replaced by a reference to its entry. A flat ``{name: tensor}`` dict is written with
the names as they are, so PyTorch's ``safetensors.torch.load_file`` reads a plast model's state dict and a file
written by ``safetensors.torch.save_file`` loads here as a flat dict.

Devices follow torch.load: the tree records where each non-CPU tensor lived (``"device": "cuda"``), and load
puts each tensor back there unless ``map_location`` says otherwise (CudaUnavailableError, with the hint to pass
``map_location="cpu"``, where the GPU is missing). Tensors of files without that record (other tools' flat
files, plast files of CPU tensors) are on the CPU.

Writes are atomic (temporary file in the same directory, fsync, rename); a damaged, truncated or inconsistent
file raises CheckpointError, never a crash.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ._core._structs import TensorBase
from ._core.cuda_driver import CudaUnavailableError
from ._core.devices import Device, as_device, device
from ._core.errors import CheckpointError
from ._core.hints import DeviceLike
from .ops.creation import tensor

FORMAT = "plast.save/1"
_TREE_KEY = "plast"


def _host_values(t):
    """t's values as a C-contiguous host array of t's shape: a CUDA tensor is copied down (``_np_array``), a
    strided view is packed. NOTE: np.ascontiguousarray would turn a 0-d array (BatchNorm's
    num_batches_tracked, an optimizer's step) into shape (1,), which then fails to load into the model."""
    return np.require(t.detach()._np_array(), requirements="C")


def _ref(key, t):
    """The tree's reference to tensor entry `key`, with t's device when it is not the CPU."""
    if t.device.type == "cpu":
        return {"__tensor__": key}
    return {"__tensor__": key, "device": str(t.device)}


def _encode(obj, tensors, path):
    if isinstance(obj, TensorBase):
        key = path or "tensor"
        if key in tensors:
            key = f"{key}#{len(tensors)}"
        tensors[key] = _host_values(obj)
        return _ref(key, obj)
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not any(k.startswith("__") for k in obj):
            return {k: _encode(v, tensors, f"{path}.{k}" if path else k) for k, v in obj.items()}
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(
                    f"plast.save: dict keys must be str, int, float, bool or None, got {type(k).__name__}"
                )
            items.append([k, _encode(v, tensors, f"{path}.{k}" if path else str(k))])
        return {"__dict__": items}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(
        f"plast.save can store tensors, dicts, lists, tuples, numbers, strings and None; got {type(obj).__name__} "
        f"at {path or 'the top level'} (pickle is never used, so arbitrary objects can't be saved)"
    )


def _decode(node, tensors, place):
    if isinstance(node, list):
        return [_decode(v, tensors, place) for v in node]
    if isinstance(node, dict):
        if "__tensor__" in node:
            key = node["__tensor__"]
            if key not in tensors:
                raise CheckpointError(
                    f"plast.load: the file's metadata refers to a tensor {key!r} it does not hold"
                )
            return place(tensors[key], node.get("device", "cpu"))
        if "__tuple__" in node:
            return tuple(_decode(v, tensors, place) for v in node["__tuple__"])
        if "__dict__" in node:
            return {
                (tuple(k) if isinstance(k, list) else k): _decode(v, tensors, place)
                for k, v in node["__dict__"]
            }
        if "__float__" in node:
            return float(node["__float__"])
        return {k: _decode(v, tensors, place) for k, v in node.items()}
    return node


def _saved_device(location):
    try:
        return as_device(location)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"plast.load: the file records an unknown device {location!r} ({e})") from e


def _placer(map_location):
    """place(host array, saved location) -> tensor, by torch.load's rules for `map_location`: None keeps the
    saved device; a device (or its name) takes everything there; a dict maps saved locations ("cuda", "cuda:0",
    "cpu") to devices and keeps the others; a callable f(cpu_tensor, location) returns the tensor to use, or
    None for the saved device."""

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
        table = {as_device(k): as_device(v) for k, v in map_location.items()}

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


def save(obj: Any, path: str | os.PathLike[str], metadata: Mapping[str, Any] | None = None) -> None:
    """Save a tensor or a (nested) state dict to `path` in safetensors format, atomically.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> plast.save({"w": plast.ones(2)}, p)
    >>> plast.load(p)["w"].tolist()
    [1.0, 1.0]
    """
    from safetensors.numpy import save_file

    tensors = {}
    flat = (
        isinstance(obj, dict)
        and obj
        and all(isinstance(k, str) and isinstance(v, TensorBase) for k, v in obj.items())
    )
    if flat:
        for k, v in obj.items():
            tensors[k] = _host_values(v)
        tree = {k: _ref(k, v) for k, v in obj.items()}
    else:
        tree = _encode(obj, tensors, "")
    meta = {"format": FORMAT, _TREE_KEY: json.dumps(tree, allow_nan=False)}
    if metadata:
        for k, v in metadata.items():
            if k in meta:
                raise ValueError(f"plast.save: metadata key {k!r} is reserved")
            meta[str(k)] = str(v)
    _atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))


def load(
    path: str | os.PathLike[str],
    map_location: DeviceLike | Mapping[str, DeviceLike] | Callable[..., Any] | None = None,
    *,
    with_metadata: bool = False,
) -> Any:
    """Load what plast.save wrote (or a flat safetensors file, e.g. from ``safetensors.torch.save_file``).

    Tensors come back as leaves in persistent memory, each on the device it was saved from (as torch.load does)
    unless `map_location` moves it: a device such as ``"cpu"`` or ``"cuda"``, a dict from saved locations to
    devices (``{"cuda:0": "cpu"}``), or a callable ``f(cpu_tensor, location)`` returning the tensor to use (or
    None for the saved device). Never executes code from the file.
    """
    from safetensors import safe_open

    place = _placer(map_location)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CheckpointError(f"plast.load: no such file: {path}")
    try:
        tensors = {}
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            for k in f.keys():
                tensors[k] = f.get_tensor(k)
    except CheckpointError:
        raise
    except Exception as e:  # safetensors raises several types for damaged files; all mean the same here
        raise CheckpointError(
            f"plast.load: {path} is not a readable safetensors file ({type(e).__name__}: {e})"
        ) from e
    if _TREE_KEY in meta:
        try:
            tree = json.loads(meta[_TREE_KEY])
        except ValueError as e:
            raise CheckpointError(f"plast.load: {path} has damaged plast metadata ({e})") from e
        out = _decode(tree, tensors, place)
    else:
        out = {k: place(v, "cpu") for k, v in tensors.items()}
    if with_metadata:
        extra = {k: v for k, v in meta.items() if k not in ("format", _TREE_KEY)}
        return out, extra
    return out


__all__ = ["save", "load"]
