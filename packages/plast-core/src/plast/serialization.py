"""plast.save / plast.load: state dicts in safetensors, never pickle.

A file holds the tensors (made contiguous first: safetensors writes raw buffers) and, in its metadata, a JSON tree
of everything else: nested dicts (any JSON-able keys, ints included, as optimizer state uses), lists, tuples and
plain values, with each tensor replaced by a reference to its entry. A flat ``{name: tensor}`` dict is written with
the names as they are, so PyTorch's ``safetensors.torch.load_file`` reads a plast model's state dict and a file
written by ``safetensors.torch.save_file`` loads here as a flat dict.

Writes are atomic (temporary file in the same directory, fsync, rename); a damaged, truncated or inconsistent
file raises CheckpointError, never a crash.
"""

import json
import math
import os
import tempfile

import numpy as np

from .errors import CheckpointError

FORMAT = "plast.save/1"
_TREE_KEY = "plast"


def _encode(obj, tensors, path):
    from .tensor import Tensor

    if isinstance(obj, Tensor):
        key = path or "tensor"
        if key in tensors:
            key = f"{key}#{len(tensors)}"
        tensors[key] = np.ascontiguousarray(obj.detach()._np_array())
        return {"__tensor__": key}
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


def _decode(node, tensors):
    from .creation import tensor

    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if isinstance(node, dict):
        if "__tensor__" in node:
            key = node["__tensor__"]
            if key not in tensors:
                raise CheckpointError(
                    f"plast.load: the file's metadata refers to a tensor {key!r} it does not hold"
                )
            return tensor(tensors[key])
        if "__tuple__" in node:
            return tuple(_decode(v, tensors) for v in node["__tuple__"])
        if "__dict__" in node:
            return {
                (tuple(k) if isinstance(k, list) else k): _decode(v, tensors) for k, v in node["__dict__"]
            }
        if "__float__" in node:
            return float(node["__float__"])
        return {k: _decode(v, tensors) for k, v in node.items()}
    return node


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


def save(obj, path, metadata=None):
    """Save a tensor or a (nested) state dict to `path` in safetensors format, atomically.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> plast.save({"w": plast.ones(2)}, p)
    >>> plast.load(p)["w"].tolist()
    [1.0, 1.0]
    """
    from safetensors.numpy import save_file

    from .tensor import Tensor

    tensors = {}
    flat = (
        isinstance(obj, dict)
        and obj
        and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())
    )
    if flat:
        for k, v in obj.items():
            tensors[k] = np.ascontiguousarray(v.detach()._np_array())
        tree = {k: {"__tensor__": k} for k in obj}
    else:
        tree = _encode(obj, tensors, "")
    meta = {"format": FORMAT, _TREE_KEY: json.dumps(tree, allow_nan=False)}
    if metadata:
        for k, v in metadata.items():
            if k in meta:
                raise ValueError(f"plast.save: metadata key {k!r} is reserved")
            meta[str(k)] = str(v)
    _atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))


def load(path, *, with_metadata=False):
    """Load what plast.save wrote (or a flat safetensors file, e.g. from ``safetensors.torch.save_file``).

    Tensors come back as leaves in persistent memory. Never executes code from the file.
    """
    from safetensors import safe_open

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
    from .creation import tensor

    if _TREE_KEY in meta:
        try:
            tree = json.loads(meta[_TREE_KEY])
        except ValueError as e:
            raise CheckpointError(f"plast.load: {path} has damaged plast metadata ({e})") from e
        out = _decode(tree, tensors)
    else:
        out = {k: tensor(v) for k, v in tensors.items()}
    if with_metadata:
        extra = {k: v for k, v in meta.items() if k not in ("format", _TREE_KEY)}
        return out, extra
    return out


__all__ = ["save", "load"]
