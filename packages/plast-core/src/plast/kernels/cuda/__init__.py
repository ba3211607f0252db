"""CUDA kernels (NVIDIA GPUs, compute capability 8.0 and newer), compiled through PyCUDA on first use.

``cu/<family>.cu`` holds a family's kernels, ``loader.py`` compiles and caches them, ``kernels*.py`` and
``transfer.py`` launch them for the op table's "cuda" column (gathered by ``table.py``), ``codegen.py`` generates
fused elementwise chains and ``graphs.py`` replays ``@plast.jit`` plans as CUDA graphs. Whether a GPU is usable,
and its context, are plast._core.cuda_driver's; importing this package imports no pycuda.
"""
