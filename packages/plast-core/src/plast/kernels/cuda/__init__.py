"""CUDA kernels (NVIDIA GPUs, compute capability 8.0 and newer), compiled through PyCUDA on first use.

``cu/<family>.cu`` holds a family's kernels, ``loader.py`` compiles and caches them, ``kernels*.py`` and
``transfer.py`` launch them for the op table's "cuda" column, ``codegen.py`` generates fused elementwise chains and
``graphs.py`` replays ``@plast.jit`` plans as CUDA graphs. Whether a GPU is usable is plast._core.cuda_driver's
question; importing this package imports no pycuda.
"""


def register_cuda_kernels():
    """Fill the op table's "cuda" column (plast.memory.arenas calls it when the CUDA arenas are made, i.e. for the
    first CUDA tensor)."""
    from . import kernels

    return kernels.register_cuda_kernels()
