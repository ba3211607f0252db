"""The lowest layer of plast-core: errors, dtypes, devices, grad mode, shape arithmetic and the CUDA driver probe.

Every other layer may import from here; nothing here imports from another layer (tests/test_architecture.py).
"""
