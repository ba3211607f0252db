"""The checks test_ddp.py runs on 2 ranks under mpiexec (``python ddp_checks.py NAME[,NAME...]``); each prints
``ok NAME`` on every rank when it passes. The 1-process references run on each rank too (they are cheap), so a
rank compares its DDP result with the full-batch result without any communication."""

import os
import signal
import sys

import numpy as np

import plast
import plast.distributed as dist
import plast.nn as nn
import plast.optim as optim

B, T = 8, 16


def gpt(seed):
    plast.manual_seed(seed)
    cfg = nn.GPTConfig(block_size=T, vocab_size=65, n_layer=2, n_head=2, n_embd=32, gelu_approximate="tanh")
    return nn.GPT(cfg)


def batches(steps, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.integers(0, 65, (B, T))
        y = rng.integers(0, 65, (B, T))
        yield x, y


def loss_of(model, x, y):
    return loss_of_tensors(model, plast.tensor(x), plast.tensor(y))


def loss_of_tensors(model, x, y):
    _, loss = model(x, y)
    return loss


def params(model):
    return {k: v.detach().numpy().copy() for k, v in model.named_parameters()}


def assert_close(got, want, rtol, what):
    import os

    if os.environ.get("SHOW"):
        for k in want:
            a, b = got[k], want[k]
            print(k, np.abs(a - b).max() / max(np.abs(b).max(), 1e-12), np.abs(b).max())
    for k in want:
        a, b = got[k], want[k]
        err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-12)
        assert err <= rtol, f"{what}: {k} differs by {err:.2e} (relative to its largest value)"


def shard(x, rank, world):
    n = len(x) // world
    return x[rank * n : (rank + 1) * n]


def train(model, steps, rank, world, ddp_kwargs=None):
    """AdamW steps: DDP on this rank's share of each batch (ddp_kwargs given), or 1 process on the whole."""
    net = nn.parallel.DistributedDataParallel(model, **ddp_kwargs) if ddp_kwargs is not None else model
    opt = optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    for x, y in batches(steps):
        if ddp_kwargs is not None:
            x, y = shard(x, rank, world), shard(y, rank, world)
        opt.zero_grad()
        loss_of(net, x, y).backward()
        opt.step()
    return model


def check_ddp(rank, world):
    # NOTE: float64, because in float32 the attention's key bias (whose gradient is zero up to rounding) follows
    # its rounding noise through Adam's normalization, and the noise differs between a half and a whole batch
    want = params(train(gpt(0).double(), 20, rank, world))
    # rank 1 starts from other weights: DDP's construction broadcasts rank 0's
    got = params(train(gpt(rank).double(), 20, rank, world, {}))
    assert_close(got, want, 1e-6, "DDP")
    # float32: many buckets (a small cap) with gradients as bucket views give what one default bucket gives
    want = params(train(gpt(rank), 20, rank, world, {}))
    got = params(train(gpt(rank), 20, rank, world, {"bucket_cap_mb": 0.01, "gradient_as_bucket_view": True}))
    assert_close(got, want, 1e-6, "DDP with buckets as views")
    print("ok ddp", flush=True)


def check_buckets(rank, world):
    plast.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(6)])  # 6 x 257 KiB
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.6, gradient_as_bucket_view=True)
    names = {id(p): k for k, p in model.named_parameters()}
    order = [names[id(p)] for b in ddp._buckets for p in b.params]
    assert order == [k for k, _ in reversed(list(model.named_parameters()))], order
    sizes = [sum(p.numel() * 4 for p in b.params) for b in ddp._buckets]
    # the first bucket holds up to 1 MiB (3 layers and a weight), the others up to 0.6 MiB (2 layers)
    assert sizes[0] <= 2**20 and sizes[0] + 256 * 256 * 4 > 2**20, sizes
    assert all(s <= 0.6 * 2**20 for s in sizes[1:]) and len(sizes) == 3, sizes
    x = plast.ones(4, 256) * (rank + 1)
    ddp(x).sum().backward()
    for b in ddp._buckets:
        for p, view in zip(b.params, b.views):
            assert p.grad is view  # the gradient lives in the bucket: no copy after the allreduce
    assert "module.0.weight" in ddp.state_dict()
    print("ok buckets", flush=True)


def check_no_sync(rank, world):
    # two micro-batches per rank, the first under no_sync, equal one backward over the whole batch
    x, y = next(batches(1, seed=5))
    ref = gpt(0)
    loss_of(ref, x, y).backward()
    want = {k: p.grad.numpy().copy() for k, p in ref.named_parameters()}
    model = gpt(0)
    ddp = nn.parallel.DistributedDataParallel(model)
    xs, ys = shard(x, rank, world), shard(y, rank, world)
    half = len(xs) // 2
    with ddp.no_sync():
        (loss_of(ddp, xs[:half], ys[:half]) * 0.5).backward()
    local = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    (loss_of(ddp, xs[half:], ys[half:]) * 0.5).backward()
    got = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    assert_close(got, want, 1e-5, "no_sync accumulation")
    assert any(np.abs(local[k] - want[k]).max() > 1e-4 for k in want)  # the no_sync step did not average
    print("ok no_sync", flush=True)


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 2)
        self.b = nn.Linear(3, 2)  # used on rank 0 only
        self.c = nn.Linear(3, 2)  # used by no rank

    def forward(self, x, use_b):
        out = self.a(x)
        return out + self.b(x) if use_b else out


def check_unused(rank, world):
    plast.manual_seed(0)
    model = Branchy()
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    x = plast.ones(4, 3) * (rank + 1)
    ddp(x, rank == 0).sum().backward()
    assert model.c.weight.grad is None
    # b's gradient is rank 0's over the world size (the others add zeros)
    np.testing.assert_allclose(model.b.weight.grad.numpy(), np.full((2, 3), 4.0 / world), rtol=1e-6)
    mean_x = sum(range(1, world + 1)) / world
    np.testing.assert_allclose(model.a.weight.grad.numpy(), np.full((2, 3), 4.0 * mean_x), rtol=1e-6)
    plast.manual_seed(0)
    strict = nn.parallel.DistributedDataParallel(Branchy())
    try:
        strict(x, True).sum().backward()
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e), e
    else:
        raise AssertionError("an unused parameter went unnoticed")
    print("ok unused", flush=True)


def check_diloco(rank, world):
    # H = 1, outer lr 1, momentum 0: the outer step sets the global copy to the replicas' mean, so with an inner
    # optimizer that is linear in the gradient (SGD with momentum and weight decay; Adam is not) DiLoCo is DDP
    def sgd(net):
        return optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)

    model = gpt(rank).double()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = sgd(ddp)
    for x, y in batches(10):
        opt.zero_grad()
        loss_of(ddp, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
    want = params(model)
    model = gpt(rank).double()
    opt = optim.DiLoCo(model.parameters(), sgd(model), inner_steps=1, outer_lr=1.0, outer_momentum=0.0)
    for x, y in batches(10):
        opt.zero_grad()
        loss_of(model, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
    assert_close(params(model), want, 1e-6, "DiLoCo(H=1, lr=1, momentum=0) vs DDP")
    nbytes = sum(p.numel() * 8 for p in model.parameters())
    assert opt.bytes_sent == 10 * nbytes, (opt.bytes_sent, nbytes)
    # H = 5 with AdamW inside and the paper's outer step: ranks agree after each outer step, and only then talk
    model = gpt(rank)
    opt = optim.DiLoCo(model.parameters(), optim.AdamW(model.parameters(), lr=1e-3), inner_steps=5)
    for i, (x, y) in enumerate(batches(10)):
        opt.zero_grad()
        loss_of(model, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
        assert opt.bytes_sent == (i + 1) // 5 * sum(p.numel() * 4 for p in model.parameters())
    mine = plast.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [plast.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    for other in every:
        np.testing.assert_array_equal(other.numpy(), mine.numpy())

    # under @plast.jit: the inner plan and the outer one (its allreduce a plan step) give the eager steps' values
    def run(use_jit):
        model = gpt(rank)
        opt = optim.DiLoCo(model.parameters(), optim.AdamW(model.parameters(), lr=1e-3), inner_steps=3)
        xb, yb = plast.zeros(B // world, T, dtype=plast.int64), plast.zeros(B // world, T, dtype=plast.int64)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of_tensors(model, x, y)
            loss.backward()
            opt.step()
            return loss

        step = plast.jit(step) if use_jit else step
        for x, y in batches(9):
            with plast.no_grad():
                xb.copy_(plast.tensor(shard(x, rank, world)))
                yb.copy_(plast.tensor(shard(y, rank, world)))
            step(xb, yb)
            plast.reset_transient_arenas()
        return params(model), opt.bytes_sent, (step.traces, step.replays) if use_jit else None

    want, want_bytes, _ = run(False)
    got, got_bytes, counts = run(True)
    assert_close(got, want, 1e-5, "DiLoCo under jit")
    assert got_bytes == want_bytes and counts == (2, 7), (got_bytes, want_bytes, counts)
    print("ok diloco", flush=True)


def check_jit(rank, world):
    # under @plast.jit the allreduces are steps of the plan: jitted DDP equals eager DDP, step for step, with one
    # bucket or many as views, and a step under no_sync() has a plan of its own
    def run(use_jit, **kw):
        model = gpt(rank)  # DDP broadcasts rank 0's weights
        net = nn.parallel.DistributedDataParallel(model, **kw)
        opt = optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
        xb, yb = plast.zeros(B // world, T, dtype=plast.int64), plast.zeros(B // world, T, dtype=plast.int64)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of_tensors(net, x, y)
            loss.backward()
            opt.step()
            return loss

        def accumulate(x, y):  # no zero_grad: the synchronized step after it averages the sum
            loss_of_tensors(net, x, y).backward()

        if use_jit:
            step, accumulate = plast.jit(step), plast.jit(accumulate)
        losses = []
        for i, (x, y) in enumerate(batches(8)):
            with plast.no_grad():
                xb.copy_(plast.tensor(shard(x, rank, world)))
                yb.copy_(plast.tensor(shard(y, rank, world)))
            if i == 5:
                with net.no_sync():
                    accumulate(xb, yb)
            losses.append(step(xb, yb).item())
            plast.reset_transient_arenas()
        return losses, params(model), (step.traces, step.replays) if use_jit else None

    for kw in ({}, {"bucket_cap_mb": 0.01, "gradient_as_bucket_view": True}):
        want_losses, want, _ = run(False, **kw)
        got_losses, got, counts = run(True, **kw)
        np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
        assert_close(got, want, 1e-5, f"DDP under jit {kw}")
        assert counts == (1, 7), counts  # one trace, every later step replayed
    # find_unused_parameters agrees on the used set in Python: refused under jit with a clear message
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(3, 2), find_unused_parameters=True)
    try:
        plast.jit(lambda x: ddp(x).sum())(plast.ones(4, 3))
    except NotImplementedError as e:
        assert "find_unused_parameters" in str(e), e
    else:
        raise AssertionError("find_unused_parameters under jit did not raise")
    dist.barrier()
    print("ok jit", flush=True)


def _resume_run(rank, world, ckpt, steps, start_from=None, die_at=None):
    model = gpt(rank).double()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = optim.AdamW(ddp.parameters(), lr=1e-3, weight_decay=0.01)
    start = 0
    if start_from is not None:
        state = plast.load(start_from)
        ddp.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = state["step"]
    for step, (x, y) in enumerate(batches(steps)):
        if step < start:
            continue
        if step == die_at and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        loss_of(ddp, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
        if ckpt is not None and rank == 0 and (step + 1) % 3 == 0:
            plast.save({"model": ddp.state_dict(), "optim": opt.state_dict(), "step": step + 1}, ckpt)
    return params(model)


def check_crash(rank, world):
    # 2 ranks checkpoint every 3 steps (rank 0 writes); rank 1 dies at step 7 (the launcher names it)
    _resume_run(rank, world, os.environ["CKPT"], 10, die_at=7)
    raise AssertionError("rank 1 did not die")


def check_resume(rank, world):
    # the checkpoint of step 6 resumes on this many ranks and ends where an uninterrupted run ends
    want = params(train(gpt(0).double(), 10, rank, world))
    got = _resume_run(rank, world, None, 10, start_from=os.environ["CKPT"])
    assert_close(got, want, 1e-6, "resumed run")
    print("ok resume", flush=True)


def main():
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    for check in sys.argv[1].split(","):
        globals()[f"check_{check}"](rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
