"""The checks test_distributed.py runs on 2 ranks under mpiexec (one launch runs many checks: MPI start-up costs
more than the checks). ``python distributed_checks.py NAME`` runs the check NAME on every rank; each prints
``ok NAME`` when it passes."""

import os
import sys
import time

import numpy as np

import plast
import plast.distributed as dist
from plast.errors import DTypeError, ShapeError

DTYPES = [plast.float32, plast.float64, plast.int32, plast.int64, plast.bool, plast.bfloat16, plast.float16]


def data(rank, shape, dtype, salt=0):
    """Each rank's values, known to every rank (the numpy oracle computes with all of them)."""
    rng = np.random.default_rng(1000 * salt + rank)
    if dtype is plast.bool:
        return rng.random(shape) < 0.5
    if dtype.is_floating_point:
        return rng.standard_normal(shape).astype(dtype.np)
    return rng.integers(-5, 6, shape).astype(dtype.np)


def close(got, want, dtype):
    if dtype.itemsize == 2 and dtype.is_floating_point:
        # 16-bit values reduce in float32 and round after each combining step; the oracle may round once less
        ulp = 2.0**-7 if dtype is plast.bfloat16 else 2.0**-10
        got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
        np.testing.assert_allclose(got, want, rtol=2 * ulp, atol=2 * ulp)
    elif dtype.is_floating_point:
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype is plast.float32 else 1e-12, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


ORACLE = {
    dist.ReduceOp.SUM: lambda a, dt: (
        np.logical_or.reduce(a) if dt is plast.bool else a.sum(0).astype(a.dtype)
    ),
    dist.ReduceOp.AVG: lambda a, dt: a.mean(0).astype(a.dtype),
    dist.ReduceOp.PRODUCT: lambda a, dt: (
        np.logical_and.reduce(a) if dt is plast.bool else a.prod(0).astype(a.dtype)
    ),
    dist.ReduceOp.MIN: lambda a, dt: a.min(0),
    dist.ReduceOp.MAX: lambda a, dt: a.max(0),
    dist.ReduceOp.BAND: lambda a, dt: np.bitwise_and.reduce(a),
    dist.ReduceOp.BOR: lambda a, dt: np.bitwise_or.reduce(a),
    dist.ReduceOp.BXOR: lambda a, dt: np.bitwise_xor.reduce(a),
}


def check_collectives(rank, world):
    shape = (3, 5)
    for salt, dt in enumerate(DTYPES):
        every = np.stack([data(r, shape, dt, salt) for r in range(world)])
        for op, oracle in ORACLE.items():
            if op is dist.ReduceOp.AVG and not dt.is_floating_point:
                continue
            if op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR) and dt.is_floating_point:
                continue
            for async_op in (False, True):
                t = plast.tensor(every[rank], dtype=dt)
                work = dist.all_reduce(t, op=op, async_op=async_op)
                if async_op:
                    assert work.wait() is True and work.is_completed()
                close(t.numpy(), oracle(every, dt), dt)
        # broadcast from each rank
        for src in range(world):
            t = plast.tensor(every[rank], dtype=dt)
            dist.broadcast(t, src=src)
            close(t.numpy(), every[src], dt)
        # all_gather and all_gather_into_tensor
        outs = [plast.zeros(*shape, dtype=dt) for _ in range(world)]
        dist.all_gather(outs, plast.tensor(every[rank], dtype=dt))
        for r in range(world):
            close(outs[r].numpy(), every[r], dt)
        out = plast.zeros(world * shape[0], shape[1], dtype=dt)
        dist.all_gather_into_tensor(out, plast.tensor(every[rank], dtype=dt), async_op=True).wait()
        close(out.numpy(), every.reshape(world * shape[0], shape[1]), dt)
        # reduce_scatter and reduce_scatter_tensor: rank r keeps the r-th part of the sum
        if dt is not plast.bool:
            big = np.stack([data(r, (world * 2, 4), dt, salt + 7) for r in range(world)])
            total = big.sum(0).astype(big.dtype)
            o = plast.zeros(2, 4, dtype=dt)
            dist.reduce_scatter_tensor(o, plast.tensor(big[rank], dtype=dt))
            close(o.numpy(), total[2 * rank : 2 * rank + 2], dt)
            o = plast.zeros(2, 4, dtype=dt)
            dist.reduce_scatter(
                o, [plast.tensor(big[rank][2 * r : 2 * r + 2], dtype=dt) for r in range(world)]
            )
            close(o.numpy(), total[2 * rank : 2 * rank + 2], dt)
        # send / recv around the ring
        t = plast.tensor(every[rank], dtype=dt)
        got = plast.zeros(*shape, dtype=dt)
        w = dist.isend(t, (rank + 1) % world)
        src = dist.recv(got, src=(rank - 1) % world)
        w.wait()
        assert src == (rank - 1) % world
        close(got.numpy(), every[(rank - 1) % world], dt)
    # AVG on float32 with async and a coalesced list
    ts = [plast.ones(3) * (rank + 1), plast.ones(2, 2) * 10 * (rank + 1)]
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.AVG, async_op=True).wait()
    mean = sum(range(1, world + 1)) / world
    close(ts[0].numpy(), np.full(3, mean, np.float32), plast.float32)
    close(ts[1].numpy(), np.full((2, 2), 10 * mean, np.float32), plast.float32)
    dist.barrier()
    print("ok collectives", flush=True)


def check_lazy(rank, world):
    # a pending lazy op that reads the tensor sees its old value; views see the new one; a later op the new one
    x = plast.ones(4) * (rank + 1)
    y = x * 2  # recorded, not computed
    v = x[1:3]
    dist.all_reduce(x)
    total = sum(range(1, world + 1))
    assert y.tolist() == [2.0 * (rank + 1)] * 4, y.tolist()
    assert v.tolist() == [float(total)] * 2, v.tolist()
    assert (x * 1).tolist() == [float(total)] * 4
    # a parameter that requires grad is written outside autograd (as torch's c10d does); a saved value that
    # changed is refused by backward
    p = plast.ones(3).requires_grad_()
    loss = (p * p).sum()
    dist.all_reduce(p)
    try:
        loss.backward()
    except RuntimeError as e:
        assert "modified by an in-place operation" in str(e), e
    else:
        raise AssertionError("backward used a value that all_reduce changed")
    # a tensor that is the result of a differentiable op can't be written
    q = plast.ones(3).requires_grad_() * 2
    try:
        dist.all_reduce(q)
    except RuntimeError as e:
        assert "differentiable" in str(e), e
    else:
        raise AssertionError("all_reduce wrote a graph's tensor")
    print("ok lazy", flush=True)


def check_jit(rank, world):
    # inside @plast.jit, all_reduce, all_reduce_coalesced and broadcast are steps of the plan: every replay
    # communicates the values of its own call, in the traced order, and async works are complete
    @plast.jit
    def step(x, w):
        y = x * 2 + w  # computed as plan steps before MPI reads it
        dist.all_reduce(y)
        z = y.sum(dim=0, keepdim=True).expand(2, 3).contiguous()
        work = dist.all_reduce_coalesced([z, w * 1], op=dist.ReduceOp.AVG, async_op=True)
        work.wait()
        b = x[0] * 1
        dist.broadcast(b, src=0)
        return y, z, b

    xb, wb = plast.zeros(2, 3), plast.zeros(2, 3)
    for call in range(4):
        xs = [data(r, (2, 3), plast.float32, salt=call) for r in range(world)]
        ws = [data(r, (2, 3), plast.float32, salt=10 + call) for r in range(world)]
        with plast.no_grad():
            xb.copy_(plast.tensor(xs[rank]))
            wb.copy_(plast.tensor(ws[rank]))
        y, z, b = step(xb, wb)
        want_y = sum(2 * xs[r] + ws[r] for r in range(world))
        np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6)
        np.testing.assert_allclose(
            z.numpy(), np.broadcast_to(want_y.sum(0, keepdims=True), (2, 3)), rtol=1e-6
        )
        np.testing.assert_allclose(b.numpy(), xs[0][0], rtol=0)
    assert (step.traces, step.replays) == (1, 3), (step.traces, step.replays)
    # the other collectives are not plan steps yet: a clear error, not a wrong plan
    expect(
        NotImplementedError,
        lambda: plast.jit(lambda t: dist.all_gather_into_tensor(plast.zeros(world * 2), t))(plast.ones(2)),
        "inside a @plast.jit function",
        "all_reduce",
    )
    print("ok jit", flush=True)


def expect(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), f"{w!r} not in {e}"
        return
    raise AssertionError(f"expected {exc.__name__}")


def check_errors(rank, world):
    x = plast.ones(4)
    expect(ValueError, lambda: dist.all_reduce(plast.ones(4, 4).t()), "contiguous")
    expect(DTypeError, lambda: dist.all_reduce(plast.ones(4, dtype=plast.int64), op=dist.ReduceOp.AVG), "AVG")
    expect(ShapeError, lambda: dist.all_gather_into_tensor(plast.zeros(3), x), "world size")
    expect(DTypeError, lambda: dist.all_gather([plast.zeros(4, dtype=plast.int64)] * world, x), "dtype")
    expect(
        ValueError,
        lambda: (
            dist.all_gather([plast.zeros(4)], x) if world > 1 else (_ for _ in ()).throw(ValueError("ranks"))
        ),
        "ranks",
    )
    expect(TypeError, lambda: dist.all_reduce([1, 2]), "plast tensor")
    # ranks passing different sizes get a ShapeError naming them (all ranks raise: they all see the table)
    expect(ShapeError, lambda: dist.all_reduce(plast.ones(4 + rank)), "disagree", "rank 0", "rank 1")
    expect(ShapeError, lambda: dist.broadcast(x, 0) if rank == 0 else dist.all_reduce(x), "disagree")
    # a recv of the wrong size is an error naming the sender
    if rank == 0:
        dist.send(plast.ones(5), 1)
    elif rank == 1:
        expect(ShapeError, lambda: dist.recv(plast.zeros(4), 0), "rank 0 sent more")
    # subgroups
    g = dist.new_group([0])
    if rank == 0:
        t = plast.ones(2)
        dist.all_reduce(t, group=g)
        assert t.tolist() == [1.0, 1.0] and dist.get_world_size(g) == 1
    else:
        assert dist.get_rank(g) == -1
    g2 = dist.new_group(list(range(world)))
    t = plast.ones(2)
    dist.all_reduce(t, group=g2)
    assert t.tolist() == [float(world)] * 2
    dist.destroy_process_group(g2)
    dist.barrier()
    print("ok errors", flush=True)


def check_timeout(rank, world):
    # rank 1 dies (CHECK_MODE=kill: the launcher names it) or hangs (hang: rank 0's wait times out naming it)
    if rank == 1:
        if os.environ.get("CHECK_MODE", "kill") == "kill":
            os.kill(os.getpid(), 9)
        time.sleep(3600)
    t0 = time.monotonic()
    try:
        dist.all_reduce(plast.ones(4))
    except dist.DistTimeoutError as e:
        assert "rank 1 did not answer" in str(e), e
        print(f"ok timeout {time.monotonic() - t0:.1f}s: {e}", flush=True)
        raise
    raise AssertionError("no timeout")


def main():
    name = sys.argv[1]
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    for check in name.split(","):
        globals()[f"check_{check}"](rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
