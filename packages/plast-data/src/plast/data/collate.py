"""Collating samples into batches, with torch's ``default_collate`` rules.

``default_collate(samples)`` turns a list of samples into one batch of the same structure:

- plast tensors and numpy arrays are stacked along a new first dimension (arrays of strings or objects are an
  error); numpy scalars become a 1-d tensor of their dtype;
- Python ``int`` becomes int64, ``bool`` becomes bool and ``float`` becomes **float64** (torch's rule; call
  ``.float()`` on the batch, or return float32 numpy scalars from the dataset, for float32);
- ``str`` and ``bytes`` are left as a list;
- dicts are collated key by key, namedtuples field by field, tuples and lists position by position (a tuple
  sample gives a list batch, as in torch); nesting works at any depth.

Batches are built in numpy and wrapped at the end with ``plast.from_numpy``, one tensor per field per batch and
without a copy. numpy dtypes plast has no twin for are widened: float16 to float32, other integer types to
int64. ``default_convert`` (used when ``batch_size=None``) only turns numpy arrays and scalars into tensors.

>>> import numpy as np
>>> from plast.data import default_collate
>>> b = default_collate([{"x": np.zeros(3, np.float32), "y": 1}, {"x": np.ones(3, np.float32), "y": 2}])
>>> tuple(b["x"].shape), b["y"].tolist()
((2, 3), [1, 2])
>>> default_collate([(1.5, "a"), (2.5, "b")])[1]
['a', 'b']
"""

from __future__ import annotations

import collections.abc as abc

import numpy as np

import plast

__all__ = ["default_collate", "default_convert"]

_ERR = (
    "default_collate: batch must contain plast tensors, numpy arrays, numbers, dicts or lists; found {}. "
    "Pass collate_fn= to the DataLoader to collate other types."
)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    try:
        return np.stack(arrays)
    except ValueError as e:
        shapes = sorted({a.shape for a in arrays})
        raise RuntimeError(
            f"default_collate: stack expects each tensor to be equal size, got shapes {shapes}"
        ) from e


def _rebuild_mapping(elem, items: dict):
    if type(elem) is dict:
        return items
    try:
        return type(elem)(items)
    except TypeError:
        return items


def _rebuild_sequence(elem, items: list):
    if isinstance(elem, tuple):
        return items  # torch returns a list for tuple samples
    if type(elem) is list:
        return items
    try:
        return type(elem)(items)
    except TypeError:
        return items


def collate_numpy(batch):
    """``default_collate``'s structure with numpy arrays where it has tensors (what worker processes send)."""
    elem = batch[0]
    if isinstance(elem, plast.Tensor):
        return _stack([np.asarray(t.detach().numpy()) for t in batch])
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(f"numpy array of dtype {elem.dtype}"))
        return _stack(batch)
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(f"numpy scalar of dtype {elem.dtype}"))
        return np.array(batch)
    if isinstance(elem, bool):
        return np.array(batch)  # all bools: bool; mixed with ints: int64
    if isinstance(elem, int):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, float):
        return np.array(batch, dtype=np.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        return _rebuild_mapping(elem, {key: collate_numpy([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(collate_numpy(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return _rebuild_sequence(elem, [collate_numpy(list(s)) for s in zip(*batch)])
    raise TypeError(_ERR.format(type(elem).__name__))


def convert_numpy(data):
    """``default_convert``'s structure with numpy arrays where it has tensors (plast tensors become numpy)."""
    if isinstance(data, plast.Tensor):
        return np.asarray(data.detach().numpy())
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, np.generic) and data.dtype.kind not in "SaUO":
        return np.asarray(data)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, abc.Mapping):
        return _rebuild_mapping(data, {k: convert_numpy(v) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(convert_numpy(d) for d in data))
    if isinstance(data, tuple):
        return [convert_numpy(d) for d in data]
    if isinstance(data, abc.Sequence):
        return _rebuild_sequence(data, [convert_numpy(d) for d in data])
    return data


_WIDEN = {"f": np.float32, "i": np.int64, "u": np.int64}
_PLAST_NP = {
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(np.int64),
    np.dtype(np.int32),
    np.dtype(np.bool_),
}


def array_to_tensor(a: np.ndarray) -> plast.Tensor:
    """A plast tensor for a collated numpy array: zero-copy when it is C-contiguous, writeable and of a plast
    dtype (a freshly collated array always is); otherwise one conversion copy."""
    if a.dtype not in _PLAST_NP:
        to = _WIDEN.get(a.dtype.kind)
        if to is None or (a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and a.max() > 2**63 - 1):
            raise TypeError(f"default_collate: numpy dtype {a.dtype} has no plast equivalent")
        a = a.astype(to)
    elif not (a.flags.c_contiguous and a.flags.writeable):
        a = np.array(a, order="C", copy=True)
    return plast.from_numpy(a)


def to_plast(data):
    """Wrap every numpy array in a collated structure as a plast tensor (the structure is kept)."""
    if isinstance(data, np.ndarray):
        return array_to_tensor(data)
    if isinstance(data, (str, bytes, plast.Tensor)):
        return data
    if isinstance(data, abc.Mapping):
        return _rebuild_mapping(data, {k: to_plast(v) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(to_plast(d) for d in data))
    if isinstance(data, (list, tuple)):
        out = [to_plast(d) for d in data]
        return out if type(data) is list else type(data)(out)
    return data


def default_collate(batch):
    """Collate a list of samples into a batch of plast tensors (rules in the module docstring).

    >>> import plast
    >>> default_collate([plast.ones(2), plast.zeros(2)]).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    >>> default_collate([1, 2, 3]).dtype, default_collate([0.5, 1.0]).dtype
    (plast.int64, plast.float64)
    """
    elem = batch[0]
    if isinstance(elem, plast.Tensor) and any(t.requires_grad for t in batch):
        stack = getattr(plast, "stack", None)
        if stack is not None:
            return stack(list(batch))  # keeps the graph when samples require grad
    return to_plast(collate_numpy(batch))


def default_convert(data):
    """Turn numpy arrays and numpy scalars (also inside dicts, tuples and lists) into plast tensors; leave other
    values as they are. The DataLoader uses it when ``batch_size=None``.

    >>> import numpy as np
    >>> default_convert({"a": np.arange(3), "b": 7})["a"].tolist()
    [0, 1, 2]
    """
    return to_plast(convert_numpy(data))
