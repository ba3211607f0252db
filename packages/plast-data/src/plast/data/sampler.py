"""Samplers: which dataset indices a DataLoader reads, and in what order.

Every sampler here is resumable: ``state_dict()`` returns a small dict of plain ints (JSON-friendly) and
``load_state_dict(sd)`` makes the sampler's next ``__iter__`` yield exactly what the saved one had left to yield
in its epoch (or the next epoch when none was in progress).

Random order comes from plast's counter-based Philox generator: a permutation is the stable argsort of one 64-bit
draw per index, so it is a pure function of the generator's (seed, offset) and is the same on every machine.

>>> from plast.data import BatchSampler, RandomSampler
>>> import plast
>>> s = RandomSampler(range(10), generator=plast.Generator().manual_seed(0))
>>> sorted(s) == list(range(10))
True
>>> list(BatchSampler(range(5), batch_size=2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sized

import numpy as np

import plast

__all__ = [
    "BatchSampler",
    "DistributedSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
]

_STATE_VERSION = 1


# ---- Philox helpers ----------------------------------------------------------------------------------------


def _gen_state(g: plast.Generator) -> list[int]:
    """A generator's (seed, offset) as two plain non-negative ints."""
    return [int(v) for v in np.asarray(g.get_state().numpy()).view(np.uint64).tolist()]


def _set_gen_state(g: plast.Generator, state) -> None:
    g.set_state(np.asarray([int(state[0]), int(state[1])], dtype=np.uint64).view(np.int64))


def _draw_seed(generator: plast.Generator | None) -> int:
    """One non-negative 62-bit seed from `generator` (the global plast generator when None)."""
    return int(plast.randint(0, 1 << 62, (1,), generator=generator).numpy()[0])


def _randperm(n: int, generator: plast.Generator | None) -> np.ndarray:
    """A permutation of range(n) as int64: stable argsort of one 62-bit Philox draw per index."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    keys = plast.randint(0, 1 << 62, (n,), generator=generator).numpy()
    return np.argsort(keys, kind="stable").astype(np.int64, copy=False)


_BLOCK = 1 << 16  # indices drawn (and handed out) at a time by the lazy index sequences below; even


class _LazyDraws:
    """The index sequence of one RandomSampler epoch, drawn block by block as it is read (never all at once).

    Block ``k`` is drawn from the epoch's (seed, offset) moved on by ``k`` times the offset one block uses, which
    is measured once by drawing block 0: Philox is counter-based, so a block depends only on where it starts.
    With replacement a block is ``_BLOCK`` uniform draws (an even count, so the blocks join into exactly what one
    draw of every index gives); without, a block is one permutation. Reading a slice draws only its blocks, so
    ``num_samples=10**10`` costs memory for one block.
    """

    def __init__(self, n: int, total: int, replacement: bool, state: list[int]):
        self.n, self.total, self.replacement = n, total, replacement
        self.block = min(_BLOCK, total) if replacement else n
        self.seed, self.offset = int(state[0]), int(state[1])
        self._cache: tuple[int, np.ndarray] | None = None
        first = self._draw_at(self.offset, self.block)
        self.step = self._gen_offset - self.offset  # Philox offset used by one full block
        self._cache = (0, first)

    def _draw_at(self, offset: int, size: int) -> np.ndarray:
        g = plast.Generator()
        _set_gen_state(g, [self.seed, offset])
        if self.replacement:
            out = plast.randint(0, self.n, (size,), generator=g).numpy().astype(np.int64, copy=False)
        else:
            out = _randperm(self.n, g)
        self._gen_offset = _gen_state(g)[1]
        return out

    def _block(self, k: int) -> np.ndarray:
        if self._cache is not None and self._cache[0] == k:
            return self._cache[1]
        start = k * self.block
        size = min(self.block, self.total - start) if self.replacement else self.block
        arr = self._draw_at(self.offset + k * self.step, size)
        self._cache = (k, arr)
        return arr

    def end_state(self) -> list[int]:
        """The generator state after the epoch, as if all of it had been drawn at once (as plast-data 0.1 did)."""
        full, rest = divmod(self.total, self.block)
        if rest == 0:
            return [self.seed, self.offset + full * self.step]
        if not self.replacement:  # the last, partial pass is a whole permutation cut short
            return [self.seed, self.offset + (full + 1) * self.step]
        self._draw_at(self.offset + full * self.step, rest)
        return [self.seed, self._gen_offset]

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, key: slice) -> np.ndarray:
        start, stop, stride = key.indices(self.total)
        assert stride == 1, "lazy index sequences are read in order"
        parts = []
        while start < stop:
            k, at = divmod(start, self.block)
            arr = self._block(k)
            take = min(stop - start, len(arr) - at, self.total - k * self.block - at)
            parts.append(arr[at : at + take])
            start += take
        if not parts:
            return np.empty(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _check_version(sd: dict, who: str) -> None:
    v = sd.get("version", _STATE_VERSION)
    if v != _STATE_VERSION:
        raise ValueError(
            f"{who}.load_state_dict: state version {v} is not supported (expected {_STATE_VERSION})"
        )


# ---- samplers -----------------------------------------------------------------------------------------------


class Sampler:
    """Base class: an iterable of dataset indices (or of index lists, for batch samplers).

    Subclasses implement ``__iter__`` and usually ``__len__``; resumable ones add ``state_dict`` and
    ``load_state_dict``.
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def _walk(self, chunk: int | None):
        """Yield this epoch's indices (one by one, or as lists of `chunk`), keeping ``_yielded`` current.

        Subclasses define ``_epoch()`` -> (index array, number to skip); it runs at the first ``next``. The array
        may be a ``_LazyDraws``: it is only ever sliced, a block at a time.
        """
        arr, skip = self._epoch()
        self._yielded, self._in_epoch = skip, True
        try:
            if chunk is None:
                for start in range(skip, len(arr), _BLOCK):
                    for i in arr[start : start + _BLOCK].tolist():
                        self._yielded += 1
                        yield i
            else:
                for start in range(skip, len(arr), chunk):
                    part = arr[start : start + chunk].tolist()
                    self._yielded += len(part)
                    yield part
        finally:  # also when an abandoned iterator is closed
            self._in_epoch = False

    # NOTE: no default __len__, as in torch: len() of a sampler without one raises TypeError.


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1 in order.

    >>> list(SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized):
        self.data_source = data_source
        self._yielded = 0  # in the epoch in progress
        self._in_epoch = False
        self._skip = 0  # from load_state_dict, applied by the next __iter__

    def _epoch(self):
        skip, self._skip = self._skip, 0
        return np.arange(len(self.data_source), dtype=np.int64), skip

    def __iter__(self) -> Iterator[int]:
        return self._walk(None)

    def _chunks(self, size: int) -> Iterator[list[int]]:
        return self._walk(size)

    def __len__(self) -> int:
        return len(self.data_source)

    def state_dict(self) -> dict:
        yielded = self._yielded if self._in_epoch else self._skip
        return {"version": _STATE_VERSION, "yielded": int(yielded)}

    def load_state_dict(self, state_dict: dict) -> None:
        _check_version(state_dict, "SequentialSampler")
        self._skip = int(state_dict["yielded"])
        self._in_epoch = False


class RandomSampler(Sampler):
    """Indices in a random order drawn from a plast ``Generator`` (Philox), as torch's RandomSampler.

    Without replacement, each pass over the data is a permutation; ``num_samples`` larger than the data repeats
    whole permutations and then a prefix of one more. With replacement, indices are uniform draws. Indices are
    drawn lazily, a block of 65,536 (or one permutation) at a time, so ``num_samples`` may be huge (``10**10``)
    at the memory cost of one block; the sequence is the same as drawing it all at once. When
    ``generator`` is None each epoch takes a fresh seed from plast's global generator (``plast.manual_seed``
    makes that reproducible).

    >>> g = plast.Generator().manual_seed(1)
    >>> a = list(RandomSampler(range(6), generator=g))
    >>> b = list(RandomSampler(range(6), generator=plast.Generator().manual_seed(1)))
    >>> a == b and sorted(a) == list(range(6))
    True
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: plast.Generator | None = None,
    ):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, got replacement={replacement!r}")
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(
                f"num_samples should be a positive integer value, got num_samples={num_samples!r}"
            )
        if generator is not None and not isinstance(generator, plast.Generator):
            raise TypeError(f"generator must be a plast.Generator, got {type(generator).__name__}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        self._epoch_state: list[int] | None = None  # (seed, offset) the epoch in progress started from
        self._yielded = 0
        self._in_epoch = False
        # from load_state_dict (or a pre-drawn seed), used by the next epoch
        self._pending: dict | None = None

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __len__(self) -> int:
        return self.num_samples

    def _start_state(self) -> tuple[list[int], int]:
        """The (seed, offset) the next epoch draws from, and how many of its indices to skip."""
        if self._pending is not None:
            p, self._pending = self._pending, None
            return list(p["generator_state"]), int(p["yielded"])
        if self.generator is None:
            return [_draw_seed(None), 0], 0
        return _gen_state(self.generator), 0

    def _epoch(self):
        state, skip = self._start_state()
        n = len(self.data_source)
        if n == 0:
            raise ValueError("RandomSampler: the data source is empty")
        self._epoch_state = state
        draws = _LazyDraws(n, self.num_samples, self.replacement, state)
        if self.generator is not None:
            # advance a user generator at once, exactly as drawing the whole epoch would
            _set_gen_state(self.generator, draws.end_state())
        return draws, skip

    def __iter__(self) -> Iterator[int]:
        return self._walk(None)

    def _chunks(self, size: int) -> Iterator[list[int]]:
        return self._walk(size)

    def state_dict(self) -> dict:
        """The epoch's start state and how far it got; between epochs, the state the next epoch starts from.

        NOTE: with ``generator=None`` and no epoch in progress, this draws the next epoch's seed from plast's
        global generator now (the next ``__iter__`` uses it) so that the returned state determines that epoch.
        """
        if self._in_epoch:
            return {
                "version": _STATE_VERSION,
                "generator_state": list(self._epoch_state),
                "yielded": self._yielded,
            }
        if self._pending is None:
            state, _ = self._start_state()
            self._pending = {"generator_state": state, "yielded": 0}
        return {"version": _STATE_VERSION, **self._pending}

    def load_state_dict(self, state_dict: dict) -> None:
        _check_version(state_dict, "RandomSampler")
        gs = state_dict["generator_state"]
        self._pending = {"generator_state": [int(gs[0]), int(gs[1])], "yielded": int(state_dict["yielded"])}
        self._in_epoch = False


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (a fresh permutation each epoch).

    >>> sorted(SubsetRandomSampler([5, 7, 9], generator=plast.Generator().manual_seed(0)))
    [5, 7, 9]
    """

    def __init__(self, indices, generator: plast.Generator | None = None):
        self.indices = indices
        self._inner = RandomSampler(range(len(indices)), generator=generator)

    @property
    def generator(self):
        return self._inner.generator

    def __iter__(self) -> Iterator:
        for i in self._inner:
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)

    def state_dict(self) -> dict:
        return self._inner.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self._inner.load_state_dict(state_dict)


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size` (the last one shorter unless `drop_last`).

    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=True))
    [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self._epoch_sampler_state: dict | None = None
        self._yielded = 0
        self._skipped = 0
        self._in_epoch = False
        self._pending: dict | None = None

    def __iter__(self) -> Iterator[list[int]]:
        pending, self._pending = self._pending, None
        skip = 0
        if pending is not None:
            if pending.get("sampler") is not None:
                self.sampler.load_state_dict(pending["sampler"])
            skip = int(pending["yielded"])
        self._epoch_sampler_state = _sampler_state(self.sampler)
        self._yielded, self._skipped, self._in_epoch = 0, skip, True
        bs, done = self.batch_size, 0
        chunks = getattr(self.sampler, "_chunks", None)
        # NOTE: plast's samplers hand out whole batches of indices (a slice of their index array), which
        # saves one Python step per index.
        it = chunks(bs) if callable(chunks) else iter(self.sampler)
        take = (lambda: next(it, [])) if callable(chunks) else (lambda: list(itertools.islice(it, bs)))
        try:
            while True:
                batch = take()
                if not batch or (len(batch) < bs and self.drop_last):
                    break
                if done < skip:
                    done += 1
                    continue
                self._yielded += 1
                yield batch
                if len(batch) < bs:
                    break
        finally:
            self._in_epoch = False

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size

    def state_dict(self) -> dict:
        if self._in_epoch:
            return {
                "version": _STATE_VERSION,
                "sampler": self._epoch_sampler_state,
                "yielded": self._skipped + self._yielded,
            }
        if self._pending is not None:
            return {"version": _STATE_VERSION, **self._pending}
        return {"version": _STATE_VERSION, "sampler": _sampler_state(self.sampler), "yielded": 0}

    def load_state_dict(self, state_dict: dict) -> None:
        _check_version(state_dict, "BatchSampler")
        self._pending = {"sampler": state_dict.get("sampler"), "yielded": int(state_dict["yielded"])}
        self._in_epoch = False


def _sampler_state(sampler) -> dict | None:
    fn = getattr(sampler, "state_dict", None)
    return fn() if callable(fn) else None


class DistributedSampler(Sampler):
    """The share of a dataset that one of `num_replicas` data-parallel processes reads, as torch's.

    Each epoch the indices are shuffled (seeded by ``seed + epoch``, so call ``set_epoch`` every epoch) or kept
    in order, padded by repeating indices from the start until they divide evenly (or, with ``drop_last``, cut
    to a multiple of ``num_replicas``), and rank ``r`` takes every ``num_replicas``-th index from ``r``. The shards
    are disjoint and, without ``drop_last``, cover every index. ``num_replicas`` / ``rank`` default to the
    ``WORLD_SIZE`` / ``RANK`` environment variables, else 1 / 0.

    >>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
    [[0, 2, 4], [1, 3, 0]]
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None:
            num_replicas = int(os.environ.get("WORLD_SIZE", 1))
        if rank is None:
            rank = int(os.environ.get("RANK", 0))
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed
        self._yielded = 0
        self._in_epoch = False
        self._skip = 0

    def _all_indices(self) -> np.ndarray:
        n = len(self.dataset)
        if self.shuffle:
            g = plast.Generator().manual_seed(self.seed + self.epoch)
            indices = _randperm(n, g)
        else:
            indices = np.arange(n, dtype=np.int64)
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0:
                reps = math.ceil(pad / len(indices))
                indices = np.concatenate([indices, np.tile(indices, reps)[:pad]])
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        return indices[self.rank : self.total_size : self.num_replicas]

    def _epoch(self):
        skip, self._skip = self._skip, 0
        return self._all_indices(), skip

    def __iter__(self) -> Iterator[int]:
        return self._walk(None)

    def _chunks(self, size: int) -> Iterator[list[int]]:
        return self._walk(size)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that seeds the shuffle; call it before each epoch so every epoch has its own order."""
        self.epoch = int(epoch)

    def state_dict(self) -> dict:
        yielded = self._yielded if self._in_epoch else self._skip
        return {
            "version": _STATE_VERSION,
            "epoch": self.epoch,
            "seed": int(self.seed),
            "yielded": int(yielded),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        _check_version(state_dict, "DistributedSampler")
        self.epoch = int(state_dict["epoch"])
        self.seed = int(state_dict["seed"])
        self._skip = int(state_dict["yielded"])
        self._in_epoch = False
