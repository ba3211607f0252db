"""os.fork() after kernels ran on OpenMP threads: the child must compute right answers and never hang.

Each case runs in a subprocess with a timeout, so a hang fails the test instead of hanging the suite; the numbers
it prints are checked against torch here.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import torch

PRELUDE = """
import json, os, sys
import numpy as np
import plast

plast.set_num_threads(2)
a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
x = plast.from_numpy(a.copy())
# parallel kernels in the parent first, so that an OpenMP team exists when it forks
for _ in range(3):
    (x @ x).sum().item()
    (x * 2 + 1).sum(0).sum().item()


def work(i):
    m = (x @ x).numpy()
    return [float(m[i, i]), float((x * i + 1).sum().item()), float(x.exp().sum(1).numpy()[i])]
"""


def run(body, timeout=60):
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def expected(i):
    a = torch.from_numpy(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32))
    return [float((a @ a)[i, i]), float((a * i + 1).sum()), float(a.exp().sum(1)[i])]


def test_fork_after_parallel_kernels_child_computes_and_exits():
    out = run(
        """
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            res = {"threads": plast.get_num_threads(), "vals": [work(i) for i in (0, 3)]}
            os.write(w, json.dumps(res).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        _, status = os.waitpid(pid, 0)
        res = json.loads(data)
        res["status"] = status
        res["parent_threads"] = plast.get_num_threads()
        res["parent_vals"] = work(5)
        print(json.dumps(res))
        """
    )
    assert out["status"] == 0
    assert out["threads"] == 1  # the child runs single-threaded
    for got, i in zip(out["vals"], (0, 3)):
        np.testing.assert_allclose(got, expected(i), rtol=1e-4)
    np.testing.assert_allclose(out["parent_vals"], expected(5), rtol=1e-4)
    assert out["parent_threads"] >= 1


def test_fork_pool_maps_plast_ops():
    out = run(
        """
        import multiprocessing as mp
        with mp.get_context("fork").Pool(2) as pool:
            vals = pool.map(work, range(4))
        print(json.dumps(vals))
        """
    )
    for i, got in enumerate(out):
        np.testing.assert_allclose(got, expected(i), rtol=1e-4)


def test_set_num_threads_in_forked_child_warns_and_stays_single_threaded():
    out = run(
        """
        import warnings
        pid = os.fork()
        if pid == 0:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                plast.set_num_threads(2)
            ok = plast.get_num_threads() == 1 and any(issubclass(c.category, RuntimeWarning) for c in caught)
            (x @ x).sum().item()  # would hang on a second thread
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(status))
        """
    )
    assert out == 0


def test_fork_while_another_thread_holds_the_engine_lock():
    out = run(
        """
        import threading
        from plast.graph.realize import engine_lock

        held, release = threading.Event(), threading.Event()

        def holder():
            with engine_lock:  # as a thread in the middle of realize() would
                held.set()
                release.wait(30)

        th = threading.Thread(target=holder)
        th.start()
        held.wait(30)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if abs(work(1)[0] - float((x @ x).numpy()[1, 1])) < 1e-3 else 3)
        _, status = os.waitpid(pid, 0)
        release.set()
        th.join()
        print(json.dumps(status))
        """
    )
    assert out == 0
