"""The lazy graph: recording ops as nodes, the scheduler that realizes them (fingerprints, plan cache, fusion,
elementwise chains, the liveness planner) and in-place writes on a lazy graph.

Below: kernels, memory, _core. Above: ops, autograd, jit (tests/test_architecture.py holds the order).
"""
