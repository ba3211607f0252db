"""Packed sequences (torch.nn.utils.rnn): PackedSequence, pack_padded_sequence, pad_packed_sequence,
pad_sequence, pack_sequence, unpad_sequence, unpack_sequence.

A PackedSequence holds a batch of variable-length sequences time step by time step: ``data`` stacks, for each
time step t, the rows of the sequences still running at t (``batch_sizes[t]`` of them, longest sequences
first), so an RNN processes ``data[offset_t : offset_t + batch_sizes[t]]`` at step t and never computes on
padding. ``sorted_indices`` is the permutation from the caller's batch order to that longest-first order (None
when the caller's order already was sorted: ``enforce_sorted=True``) and ``unsorted_indices`` its inverse.

>>> from plast.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> p = pack_sequence([plast.tensor([1.0, 2.0, 3.0]), plast.tensor([4.0])])
>>> p.data.tolist(), p.batch_sizes.tolist()
([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
>>> padded, lengths = pad_packed_sequence(p, batch_first=True)
>>> padded.tolist(), lengths.tolist()
([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], [3, 1])
"""

from typing import NamedTuple

import numpy as np

import plast
from plast.errors import ShapeError


def _lengths_list(lengths, what):
    if isinstance(lengths, plast.Tensor):
        if lengths.ndim != 1:
            raise ShapeError(f"{what}: lengths must be a 1-D tensor, got shape {tuple(lengths.shape)}")
        return [int(v) for v in lengths.tolist()]
    if hasattr(lengths, "tolist") and not isinstance(lengths, (list, tuple)):
        lengths = lengths.tolist()
    return [int(v) for v in lengths]


def _index_tensor(idx):
    return plast.tensor(np.asarray(idx, dtype=np.int64))


def invert_permutation(permutation):
    """The inverse of a permutation given as an int64 tensor (None stays None).

    >>> from plast.nn.utils.rnn import invert_permutation
    >>> invert_permutation(plast.tensor([2, 0, 1])).tolist()
    [1, 2, 0]
    """
    if permutation is None:
        return None
    perm = np.asarray(permutation.tolist(), dtype=np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=np.int64)
    return plast.tensor(inv, device=permutation.device)


class _PackedSequenceBase(NamedTuple):
    data: "plast.Tensor"
    batch_sizes: "plast.Tensor"
    sorted_indices: "plast.Tensor | None"
    unsorted_indices: "plast.Tensor | None"


class PackedSequence(_PackedSequenceBase):
    """(data, batch_sizes, sorted_indices, unsorted_indices), as torch.nn.utils.rnn.PackedSequence: made by
    pack_padded_sequence / pack_sequence, never by hand in normal use. ``batch_sizes`` is an int64 CPU tensor.
    ``unsorted_indices`` defaults to the inverse of ``sorted_indices``.

    >>> from plast.nn.utils.rnn import PackedSequence
    >>> p = PackedSequence(plast.ones(3, 2), plast.tensor([2, 1]))
    >>> p.batch_sizes.tolist(), p.sorted_indices is None
    ([2, 1], True)
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError(
                "PackedSequence: batch_sizes is required (make packed sequences with pack_padded_sequence or "
                "pack_sequence)"
            )
        if not isinstance(batch_sizes, plast.Tensor):
            batch_sizes = _index_tensor(list(batch_sizes))
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The same packed batch with ``data`` moved/cast by ``Tensor.to`` (batch_sizes stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        si = None if self.sorted_indices is None else self.sorted_indices.to(dev)
        ui = None if self.unsorted_indices is None else self.unsorted_indices.to(dev)
        return type(self)(data, self.batch_sizes, si, ui)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda")

    def float(self):
        return self.to(plast.float32)

    def double(self):
        return self.to(plast.float64)

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"

    def is_pinned(self):
        return False


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with batch_first) of sequences of the given lengths.

    ``enforce_sorted=True`` expects lengths in decreasing order (as torch); with False the batch is sorted here
    and the permutation kept in the result, so RNN outputs come back in the caller's order.

    >>> from plast.nn.utils.rnn import pack_padded_sequence
    >>> x = plast.tensor([[1.0, 0.0], [2.0, 3.0]])  # (B=2, T=2); sequence 0 has length 1
    >>> pack_padded_sequence(x, [1, 2], batch_first=True, enforce_sorted=False).data.tolist()
    [2.0, 1.0, 3.0]
    """
    lens = _lengths_list(lengths, "pack_padded_sequence")
    if input.ndim < 2:
        raise ShapeError(
            f"pack_padded_sequence: expected a padded batch of shape (T, B, *) or (B, T, *) with batch_first, "
            f"got shape {tuple(input.shape)}"
        )
    b_dim = 0 if batch_first else 1
    B, T = input.shape[b_dim], input.shape[1 - b_dim]
    if len(lens) != B:
        raise ValueError(
            f"pack_padded_sequence: expected {B} lengths (one per sequence of the batch dim), got {len(lens)}"
        )
    if any(n <= 0 for n in lens):
        raise RuntimeError(
            f"pack_padded_sequence: every length must be > 0 (empty sequences cannot be packed), got {lens}"
        )
    if max(lens) > T:
        raise RuntimeError(
            f"pack_padded_sequence: a length ({max(lens)}) exceeds the padded length of the input ({T})"
        )
    sorted_indices = None
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(B - 1)):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                f"requirement if you do not need ONNX exportability (got lengths {lens})."
            )
    else:
        order = np.argsort(-np.asarray(lens), kind="stable")
        lens = [lens[i] for i in order]
        sorted_indices = _index_tensor(order).to(input.device)
        input = input.index_select(b_dim, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = plast.cat([input[t, :bs] for t, bs in enumerate(sizes)], dim=0)
    return PackedSequence(data, _index_tensor(sizes), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo pack_padded_sequence: ``(padded, lengths)`` with padded ``(T, B, *)`` (``(B, T, *)`` with
    batch_first) in the caller's batch order and lengths an int64 tensor; ``total_length`` pads T further.

    >>> from plast.nn.utils.rnn import pack_sequence, pad_packed_sequence
    >>> p = pack_sequence([plast.tensor([5.0]), plast.tensor([6.0, 7.0])], enforce_sorted=False)
    >>> pad_packed_sequence(p, padding_value=-1.0)[0].tolist()
    [[5.0, 6.0], [-1.0, 7.0]]
    """
    data, batch_sizes = sequence.data, sequence.batch_sizes
    sizes = [int(v) for v in batch_sizes.tolist()]
    T, B = len(sizes), sizes[0]
    if total_length is not None:
        if total_length < T:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {T}"
            )
    feat = tuple(data.shape[1:])
    steps, off = [], 0
    for bs in sizes:
        rows = data[off : off + bs]
        off += bs
        if bs < B:
            pad = plast.full((B - bs,) + feat, padding_value, dtype=data.dtype, device=data.device)
            rows = plast.cat([rows, pad], dim=0)
        steps.append(rows)
    T_out = T if total_length is None else total_length
    if T_out > T:
        steps.extend(
            [plast.full((B,) + feat, padding_value, dtype=data.dtype, device=data.device)] * (T_out - T)
        )
    padded = plast.stack(steps, dim=0)
    lens = np.asarray([sum(1 for bs in sizes if bs > b) for b in range(B)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lens = lens[np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, plast.tensor(lens)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes ``(L_i, *)`` into ``(L_max, B, *)`` (``(B, L_max, *)`` with batch_first), padding
    with ``padding_value`` on the right (or ``padding_side="left"``).

    >>> from plast.nn.utils.rnn import pad_sequence
    >>> pad_sequence([plast.tensor([1.0]), plast.tensor([2.0, 3.0])], batch_first=True).tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    if isinstance(sequences, plast.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    feat = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if s.ndim == 0 or tuple(s.shape[1:]) != feat:
            raise ShapeError(
                f"pad_sequence: every sequence must have shape (L, {', '.join(map(str, feat)) or ''}) like "
                f"sequences[0] {tuple(sequences[0].shape)}; sequences[{i}] has shape {tuple(s.shape)}"
            )
    L = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        n = s.shape[0]
        if n < L:
            pad = plast.full((L - n,) + feat, padding_value, dtype=s.dtype, device=s.device)
            s = plast.cat([s, pad] if padding_side == "right" else [pad, s], dim=0)
        rows.append(s)
    return plast.stack(rows, dim=0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of unpadded sequences of a padded batch (inverse of pad_sequence).

    >>> from plast.nn.utils.rnn import unpad_sequence
    >>> [s.tolist() for s in unpad_sequence(plast.tensor([[1.0, 0.0], [2.0, 3.0]]), [1, 2], batch_first=True)]
    [[1.0], [2.0, 3.0]]
    """
    lens = _lengths_list(lengths, "unpad_sequence")
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(lens)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of tensors of shapes ``(L_i, *)`` (pad_sequence then pack_padded_sequence).

    >>> from plast.nn.utils.rnn import pack_sequence
    >>> pack_sequence([plast.tensor([1.0, 2.0]), plast.tensor([3.0])]).batch_sizes.tolist()
    [2, 1]
    """
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences in a PackedSequence, in the caller's order (inverse of pack_sequence).

    >>> from plast.nn.utils.rnn import pack_sequence, unpack_sequence
    >>> [s.tolist() for s in unpack_sequence(pack_sequence([plast.tensor([1.0]), plast.tensor([2.0, 3.0])], False))]
    [[1.0], [2.0, 3.0]]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]
