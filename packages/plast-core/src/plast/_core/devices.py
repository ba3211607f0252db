"""Devices: ``plast.Device.CPU`` / ``CUDA`` and the ``plast.device`` objects tensors carry."""

import enum


class Device(enum.Enum):
    CPU = "cpu"
    CUDA = "cuda"


class device:
    """Where a tensor lives. Equal to ``"cpu"``/``"cuda"``, to ``plast.Device.CPU``/``CUDA`` and to itself."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index if index is None else index
        elif isinstance(spec, Device):
            spec = spec.value
        if not isinstance(spec, str):
            raise TypeError(f"expected a device like 'cpu' or 'cuda', got {spec!r}")
        if ":" in spec:
            spec, _, idx = spec.partition(":")
            try:
                index = int(idx)
            except ValueError:
                raise ValueError(f"bad device index in {spec}:{idx!r}") from None
        if spec not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}; expected 'cpu' or 'cuda'")
        if spec == "cpu" and index not in (None, 0):
            raise ValueError(f"cpu has no device index {index}")
        self.type = spec
        self.index = index if spec == "cuda" else None

    @property
    def kind(self):
        return Device(self.type)

    def __eq__(self, other):
        if isinstance(other, device):
            return self.type == other.type and (self.index or 0) == (other.index or 0)
        if isinstance(other, Device):
            return self.type == other.value
        if isinstance(other, str):
            try:
                return self == device(other)
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __repr__(self):
        return (
            f"device(type='{self.type}')"
            if self.index is None
            else f"device(type='{self.type}', index={self.index})"
        )

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")


def as_device(x):
    if x is None:
        return CPU
    if isinstance(x, device):
        return x
    return device(x)
