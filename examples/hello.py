"""plast's hello world: how this copy was built, and a computation through the C kernels.

python examples/hello.py
"""

import time

import numpy as np

import plast

plast.show_config()

plast.manual_seed(0)
n = 4_000_000
a = plast.randn(n)
b = plast.rand(n)
t0 = time.perf_counter()
c = (a * b + 1.0).numpy()
dt = time.perf_counter() - t0
ref = a.numpy() * b.numpy() + np.float32(1.0)
assert np.array_equal(c, ref), "plast and numpy disagree"
print(
    f"\n(a * b + 1) over {n:,} floats on {plast.get_num_threads()} thread(s): {dt * 1e3:.2f} ms, matches numpy"
)
print(plast.arange(6).reshape(2, 3) * 10)
