"""plast.nn.parallel: DistributedDataParallel (torch.nn.parallel's name), over plast.distributed."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
