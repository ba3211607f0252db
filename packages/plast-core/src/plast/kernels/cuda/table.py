"""The op table's "cuda" column: every op's CUDA launcher by op name, from kernels.py, kernels_nn.py,
kernels_extra.py, kernels_rnn.py and transfer.py (this module sits above all of them, so none of them imports
another's table).

The op layer fills the column from here for the first CUDA tensor (plast.ops.registry.register_cuda_kernels);
ops with no CUDA kernel yet get a stub that raises NotImplementedError naming the op (kernels.STUBS says why).
"""

from . import kernels_extra, kernels_nn, kernels_rnn, transfer
from .kernels import POINTWISE, STUBS, not_implemented


def table():
    """op name -> CUDA kernel for every op that has one (and stubs for the rest of the table)."""
    t = dict(POINTWISE)
    t.update(kernels_nn.NN)
    t.update(kernels_extra.EXTRA)
    t.update(kernels_rnn.RNN)
    t["to_device"] = transfer.copy_to_cuda
    for name, why in STUBS.items():
        t.setdefault(name, not_implemented(name, why))
    return t


__all__ = ["table", "not_implemented"]
