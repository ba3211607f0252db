"""DistributedDataParallel: one model replica per rank, gradients averaged across ranks after each backward (torch's
torch.nn.parallel.DistributedDataParallel).

At construction rank 0's parameters and buffers are broadcast to every rank, and the parameters are split into
buckets in reverse registration order (backward reaches the last layers first): the first bucket holds up to
1 MiB, the others up to ``bucket_cap_mb``, one dtype per bucket. A post-accumulate-grad hook on every parameter
marks it ready; a bucket whose parameters are all ready starts its non-blocking allreduce (ReduceOp.AVG), and a
callback at the end of the backward pass waits for every bucket and writes the averages into ``.grad``.

Under ``@plast.jit`` the same happens while the step is traced, and the allreduces (and the buffers' broadcasts)
become steps of the plan (plast.distributed's traced collectives): each replay averages the gradients at the
point the trace did, with no Python. ``no_sync()`` and the flag it sets are part of the plan's key (a step under
``no_sync`` has a plan of its own); ``find_unused_parameters`` needs the ranks' answer in Python and is eager only.

NOTE: plast realizes a backward pass's gradients in one call at its end (DESIGN §2), so the hooks, and with them
the allreduces, start when backward has computed every gradient: today the communication does not overlap the
backward kernels. The buckets still turn many small messages into a few large ones, and their allreduces overlap
each other. Overlap needs the scheduler to hand over gradients as it computes them (plast-core's backward realize).
"""

import contextlib

import plast
import plast.distributed as dist
from plast.compiler import is_compiling as tracing

from ..module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    def __init__(self, params, dtype):
        self.params = params
        self.dtype = dtype
        self.numel = sum(p.numel() for p in params)
        self.flat = None  # gradient_as_bucket_view: the bucket's memory, the params' .grad are views of it
        self.views = None

    def make_views(self):
        self.flat = plast.zeros(self.numel, dtype=self.dtype)
        self.views, at = [], 0
        for p in self.params:
            n = p.numel()
            self.views.append(self.flat[at : at + n].view(p.shape))
            at += n


class _Pass:
    """One backward pass's bookkeeping: which parameters got a gradient, the allreduces in flight."""

    def __init__(self, n_buckets, sizes):
        self.ready = set()
        self.reduced = set()  # the parameters whose gradients the allreduces carry
        self.pending = list(sizes)  # parameters still to come, per bucket
        self.works = [None] * n_buckets
        self.queued = False


class DistributedDataParallel(Module):
    """Wrap `module` so that every rank's ``loss.backward()`` leaves the gradients averaged over all ranks in
    ``.grad`` (each rank runs its own share of the batch).

    Start the ranks with ``python -m plast.distributed.run -n 2 train.py`` and call
    ``plast.distributed.init_process_group("mpi")`` before wrapping. ``no_sync()`` skips the averaging (gradient
    accumulation: the next synchronized backward averages the accumulated sum); ``find_unused_parameters=True``
    lets some parameters get no gradient on some ranks; ``gradient_as_bucket_view=True`` leaves each ``.grad`` a
    view into its bucket (no copy back after the allreduce). ``state_dict()`` has torch DDP's ``module.`` prefix.

    >>> ddp = DistributedDataParallel(model)  # doctest: +SKIP
    >>> loss_fn(ddp(x), y).backward(); optimizer.step()  # doctest: +SKIP
    """

    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        dim=0,
        broadcast_buffers=True,
        process_group=None,
        bucket_cap_mb=None,
        find_unused_parameters=False,
        check_reduction=False,
        gradient_as_bucket_view=False,
        static_graph=False,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps a plast.nn.Module, got {type(module).__name__}")
        if device_ids or output_device is not None:
            raise ValueError(
                "DistributedDataParallel: device_ids and output_device must be None (plast's ranks hold their model "
                "on the CPU; as in torch for CPU modules)"
            )
        if dim != 0:
            raise NotImplementedError(
                "DistributedDataParallel: dim must be 0 (scattering inputs is not done)"
            )
        if not dist.is_initialized():
            raise dist.DistError(
                "DistributedDataParallel: the default process group has not been initialized; call "
                "plast.distributed.init_process_group() first"
            )
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self._no_sync_in_trace = []  # the flag before each no_sync() entered inside a step being traced
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._params = [p for p in module.parameters() if p.requires_grad]
        if not self._params:
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter that requires "
                "a gradient."
            )
        self._world = dist.get_world_size(process_group)
        self._sync_module_states()
        self._buckets = self._make_buckets()
        self._bucket_of = {}
        for b, bucket in enumerate(self._buckets):
            for p in bucket.params:
                self._bucket_of[id(p)] = b
            if gradient_as_bucket_view:
                bucket.make_views()
        self._pass = None
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in self._params]

    # ---- construction ----
    def _sync_module_states(self):
        """Every rank starts from rank 0's parameters and buffers (torch's _sync_module_states)."""
        if self._world == 1:
            return
        src = dist.get_global_rank(self.process_group or dist.group.WORLD, 0)
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            dist.broadcast(t, src=src, group=self.process_group)

    def _make_buckets(self):
        buckets, current, size, cap = [], [], 0, _FIRST_BUCKET_BYTES
        for p in reversed(self._params):
            nbytes = p.numel() * p.element_size()
            if current and (p.dtype is not current[0].dtype or size + nbytes > cap):
                buckets.append(_Bucket(current, current[0].dtype))
                current, size, cap = [], 0, self.bucket_bytes_cap
            current.append(p)
            size += nbytes
        if current:
            buckets.append(_Bucket(current, current[0].dtype))
        return buckets

    def _jit_key(self):
        # a jitted step traced with gradients averaged must not replay inside no_sync(), nor the other way round:
        # the key is the flag as the call found it (a no_sync() entered inside the traced step is part of it)
        sync = self._no_sync_in_trace[0] if self._no_sync_in_trace else self.require_backward_grad_sync
        return (super()._jit_key(), sync)

    # ---- forward ----
    def forward(self, *args, **kwargs):
        if self.find_unused_parameters and tracing():
            raise NotImplementedError(
                "DistributedDataParallel(find_unused_parameters=True) inside a @plast.jit function: which "
                "parameters the ranks used is agreed in Python each step; run the step eagerly"
            )
        if plast.is_grad_enabled() and self.require_backward_grad_sync and self._world > 1:
            # (one rank: its gradients are the average already, there is nothing to send)
            self._pass = _Pass(len(self._buckets), [len(b.params) for b in self._buckets])
        else:
            self._pass = None  # this forward's backward accumulates locally (no_sync, or no grad)
        if self.broadcast_buffers and self._world > 1:
            src = dist.get_global_rank(self.process_group or dist.group.WORLD, 0)
            for b in self.module.buffers():
                dist.broadcast(b, src=src, group=self.process_group)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside the block only accumulate ``.grad`` locally; the first
        synchronized backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        inside = tracing()
        if inside:
            self._no_sync_in_trace.append(old)
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old
            if inside:
                self._no_sync_in_trace.pop()

    # ---- backward: hooks, buckets, the end of the pass ----
    def _grad_ready(self, p):
        ps = self._pass
        if ps is None:
            return
        if not ps.queued:
            ps.queued = True
            plast.autograd.queue_callback(self._finish_pass)
        if id(p) in ps.ready:
            return
        ps.ready.add(id(p))
        if self.find_unused_parameters:
            return  # which parameters count is known only when every rank has said what it used (_finish_pass)
        b = self._bucket_of[id(p)]
        ps.pending[b] -= 1
        if ps.pending[b] == 0:
            params = self._buckets[b].params
            ps.reduced.update(id(q) for q in params)
            ps.works[b] = self._launch(self._buckets[b], [q.grad for q in params])

    def _launch(self, bucket, grads):
        if not self.gradient_as_bucket_view:
            return dist.all_reduce_coalesced(
                grads, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True
            )
        with plast.no_grad():
            for view, g in zip(bucket.views, grads):
                view.copy_(g)
        return dist.all_reduce(bucket.flat, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True)

    def _finish_pass(self):
        ps, self._pass = self._pass, None
        if ps is None:
            return
        if self.find_unused_parameters:
            self._launch_with_unused(ps)
        else:
            missing = [i for i, p in enumerate(self._params) if id(p) not in ps.ready]
            if missing:
                raise RuntimeError(
                    "DistributedDataParallel: parameters that were not used in producing the loss got no "
                    f"gradient (parameter indices {missing}); pass find_unused_parameters=True if some "
                    "parameters are not used on every step"
                )
        for b, work in enumerate(ps.works):
            if work is None:
                continue
            work.wait()
            if self.gradient_as_bucket_view:
                bucket = self._buckets[b]
                for p, view in zip(bucket.params, bucket.views):
                    if id(p) not in ps.reduced:
                        continue
                    if tracing():
                        # a replay does not rebind .grad (Python): the average goes into the .grad the plan
                        # binds, as a step
                        with plast.no_grad():
                            p.grad.copy_(view)
                    else:
                        p.grad = view

    def _launch_with_unused(self, ps):
        """find_unused_parameters: the ranks agree on which parameters any of them used (one small allreduce);
        those get averaged gradients (zeros from the ranks that did not use them), the others keep ``.grad``."""
        used = plast.tensor([1 if id(p) in ps.ready else 0 for p in self._params], dtype=plast.int32)
        dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.process_group)
        anywhere = {id(p) for p, u in zip(self._params, used.tolist()) if u}
        for b, bucket in enumerate(self._buckets):
            params = [p for p in bucket.params if id(p) in anywhere]
            if not params:
                continue
            ps.reduced.update(id(p) for p in params)
            for p in params:
                if id(p) not in ps.ready:
                    p.grad = plast.zeros_like(p)  # this rank's contribution; the average lands here
            if self.gradient_as_bucket_view:
                grads = [p.grad if id(p) in anywhere else plast.zeros_like(p) for p in bucket.params]
            else:
                grads = [p.grad for p in params]
            ps.works[b] = self._launch(bucket, grads)
