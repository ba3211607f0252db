"""Counter-based random numbers (Philox 4x32-10): ``plast.Generator`` and the global generator.

A generator is a (seed, offset) pair: every draw reads the Philox stream at `offset` and moves the offset past
what it used. Because the stream is a pure function of (seed, block), the CUDA backend reproduces the CPU's
numbers for the same seed, and a saved state restores a run exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._core import dtypes
from .._core.hints import DeviceLike, TensorBase
from ..graph import tape
from ..kernels.cpu import _kernels
from ..kernels.cpu._views import np_view
from .factory import from_array


class Generator:
    """A random number generator; pass it as ``generator=`` to rand, randn, randint, dropout, multinomial.

    >>> g = plast.Generator().manual_seed(42)
    >>> plast.rand(3, generator=g).shape
    (3,)
    """

    __slots__ = ("_seed", "_offset", "device")

    def __init__(self, device: DeviceLike = "cpu") -> None:
        self._seed = 67280421310721  # torch's default seed, for familiarity
        self._offset = 0
        self.device = device

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")
        self._seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from the OS's entropy and return the seed."""
        import os

        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> TensorBase:
        """The state as an int64 tensor [seed, offset] (``set_state`` takes it back)."""
        return from_array(np.array([self._seed, self._offset], dtype=np.uint64).view(np.int64), dtypes.int64)

    def set_state(self, state: TensorBase | Sequence[int]) -> Generator:
        arr = np.asarray(state.numpy() if hasattr(state, "numpy") else state)
        if arr.shape != (2,) or arr.dtype.kind not in "iu":
            raise ValueError(
                f"a generator state is an int64 tensor of shape (2,), got {arr.dtype} {arr.shape}"
            )
        seed, offset = arr.astype(np.int64).view(np.uint64).tolist()
        self._seed, self._offset = int(seed), int(offset)
        return self

    def _take(self, blocks):
        """Reserve `blocks` 128-bit blocks of the stream; returns (seed, offset) to draw them from."""
        off = self._offset
        self._offset += blocks
        return self._seed, off

    def __repr__(self):
        return f"<plast.Generator seed={self._seed} offset={self._offset}>"


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the global generator (and return it), like torch.manual_seed."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> TensorBase:
    return default_generator.get_state()


def set_rng_state(state: TensorBase) -> None:
    default_generator.set_state(state)


def _gen(generator):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a plast.Generator, got {type(generator).__name__}")
    return generator


def blocks_for(kind: str, dtype_code: int, n: int) -> int:
    if kind == "u32" or (kind == "uniform" and dtype_code == dtypes.float32.code):
        return (n + 3) // 4
    return (n + 1) // 2


def fill(kind, storage_address, dtype_code, n, p1, p2, generator=None):
    """Fill n elements at an address from `generator`'s stream and advance it."""
    g = _gen(generator)
    seed_, off = g._take(blocks_for(kind, dtype_code, n))
    _kernels.philox_fill(kind, dtype_code, seed_, off, storage_address, n, p1, p2)


def fill_tensor(t, kind, p1, p2, generator=None):
    """Fill a contiguous tensor with draws from `generator`; inside @plast.jit the draw is part of the plan, so a
    replay draws fresh numbers from the generator's offset at that time."""
    g = _gen(generator)

    def draw(out):
        n = out.numel()
        if not n:
            return
        if dtypes.is_16bit(out.dtype):  # drawn in float32 and rounded once (the stream is float32's)
            wide = np.empty(n, np.float32)
            fill(kind, wide.ctypes.data, dtypes.float32.code, n, p1, p2, g)
            np_view(out).reshape(-1)[...] = wide
            return
        fill(kind, out._storage.address + out._offset * out.dtype.itemsize, out.dtype.code, n, p1, p2, g)

    draw(t)
    tape.note_random(draw, t, f"random_{kind}")
    return t
