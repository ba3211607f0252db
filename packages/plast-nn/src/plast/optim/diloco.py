"""DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language Models"): each replica
runs H inner steps of its own optimizer without communicating, then one outer step: the pseudo-gradient
(global parameters - local parameters, in float32) is averaged over the replicas, and an outer SGD with Nesterov
momentum (the paper's lr 0.7, momentum 0.9; H = 500) updates the global copy, which every replica loads. Between
outer steps nothing is sent, so a link carries one model's worth of numbers every H steps instead of every step.

It lives in plast.optim, not plast.distributed: it is an optimizer over optimizers (the inner one, and plast.optim's
SGD for the outer step), and plast-core must not import plast.optim; plast.distributed is only its transport.

Replicas are either MPI ranks (one model per rank; ``python -m plast.distributed.run -n N``) or N models in one
process (pass lists: ``DiLoCo([m.parameters() for m in models], [inner_1, ..., inner_N])``), for tests and for
one machine without MPI.

Under ``@plast.jit`` a step has two plans: the inner steps', and the one of every `inner_steps`-th call, which also
holds the outer step (its allreduce is a plan step: plast.distributed's traced collectives). Which one a call
replays is part of the plans' key, and the step count moves on before each replay (a runtime input), so a jitted
DiLoCo step does what the eager one does.
"""

import plast
from plast.compiler import is_compiling, note_state, runtime_input

from .sgd import SGD


class DiLoCo:
    """Wrap `inner_optimizer` (over `params`): ``step()`` runs an inner step, and every `inner_steps`-th one also
    the outer step. ``state_dict()`` holds the inner optimizer's state, the global copy, the outer momentum and
    the step count, so a checkpoint resumes exactly.

    >>> model = plast.nn.Linear(4, 1)
    >>> opt = DiLoCo(model.parameters(), plast.optim.AdamW(model.parameters(), lr=1e-3), inner_steps=50)
    >>> opt.inner_steps, opt.outer_lr, opt.outer_momentum
    (50, 0.7, 0.9)

    ``communication_dtype=plast.bfloat16`` (or float16) sends the pseudo-gradients in 16 bits, half the bytes:
    each replica's is rounded to it, the average is taken in float32 per combining step and rounded again, and the
    outer step runs in float32 on the result (the global copy and the momentum stay float32).
    """

    def __init__(
        self,
        params,
        inner_optimizer,
        inner_steps=500,
        outer_lr=0.7,
        outer_momentum=0.9,
        nesterov=True,
        process_group=None,
        communication_dtype=None,
    ):
        if isinstance(communication_dtype, str):
            communication_dtype = getattr(plast, communication_dtype, communication_dtype)
        if communication_dtype not in (None, plast.float32, plast.float64, plast.bfloat16, plast.float16):
            raise ValueError(
                "DiLoCo: communication_dtype must be None (the parameters' float type), plast.float32, "
                f"plast.bfloat16 or plast.float16, got {communication_dtype!r}"
            )
        self.communication_dtype = communication_dtype
        if inner_steps < 1:
            raise ValueError(f"DiLoCo: inner_steps must be at least 1, got {inner_steps}")
        self.replicated = isinstance(inner_optimizer, (list, tuple))
        inners = list(inner_optimizer) if self.replicated else [inner_optimizer]
        groups = [list(p) for p in params] if self.replicated else [list(params)]
        if len(groups) != len(inners):
            raise ValueError(f"DiLoCo: {len(groups)} parameter lists for {len(inners)} inner optimizers")
        if len({len(g) for g in groups}) != 1 or not groups[0]:
            raise ValueError("DiLoCo: every replica needs the same, non-empty list of parameters")
        self.inner = inners
        self.replicas = groups
        self.inner_steps = int(inner_steps)
        self.outer_lr, self.outer_momentum, self.nesterov = outer_lr, outer_momentum, nesterov
        self.process_group = process_group
        self.local_step = 0
        self.bytes_sent = 0  # pseudo-gradient bytes this replica sent (MPI ranks) so far
        self._dist = None
        if not self.replicated and plast.distributed.is_initialized():
            self._dist = plast.distributed
            src = self._dist.get_global_rank(process_group or self._dist.group.WORLD, 0)
            for p in groups[0]:
                self._dist.broadcast(p, src=src, group=process_group)  # every rank starts from rank 0's model
        with plast.no_grad():
            # the global copy: float32 (float64 for float64 parameters), starting as replica 0's parameters
            self.global_params = [
                plast.nn.Parameter(p.detach().to(_wide(p.dtype)).clone()) for p in groups[0]
            ]
            for replica in groups[1:]:
                for p, g in zip(replica, self.global_params):
                    p.copy_(g)
        self.outer = SGD(
            self.global_params,
            lr=outer_lr,
            momentum=outer_momentum,
            nesterov=nesterov and outer_momentum > 0,
        )

    @property
    def param_groups(self):
        return self.inner[0].param_groups

    def zero_grad(self, set_to_none=True):
        for opt in self.inner:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        """One inner step of every replica (their gradients are in ``.grad``); the outer step every
        `inner_steps` steps. Returns the closure's loss when one is given (as torch optimizers do)."""
        traced = is_compiling()
        if traced:  # this call's plan holds the outer step or not: a later call replays the plan of its kind
            note_state(self, self._outer_due)
        loss = None
        for opt in self.inner:
            out = opt.step(closure)
            loss = out if loss is None else loss
        outer = self._outer_due()
        if traced:
            runtime_input(self._count_step)  # counted now and before each replay: Python runs no more
        else:
            self._count_step()
        if outer:
            self.outer_step()
        return loss

    def _outer_due(self):
        """Whether the step about to be counted is an `inner_steps`-th one (it also takes the outer step)."""
        return (self.local_step + 1) % self.inner_steps == 0

    def _count_step(self):
        self.local_step += 1

    def _count_bytes(self, n):
        self.bytes_sent += n

    def outer_step(self):
        """Average the pseudo-gradients (global - local) over the replicas, take the outer SGD step on the global
        copy, and load it into every replica."""
        with plast.no_grad():
            deltas = [
                [(g - p.detach().to(g.dtype)).clone() for p, g in zip(replica, self.global_params)]
                for replica in self.replicas
            ]
            cd = self.communication_dtype
            if cd is not None:  # what travels: each replica's pseudo-gradient in that dtype
                deltas = [[d.to(cd) for d in ds] for ds in deltas]
            if self._dist is not None and self._dist.get_world_size(self.process_group) > 1:
                (local,) = deltas
                self._dist.all_reduce_coalesced(local, op=self._dist.ReduceOp.AVG, group=self.process_group)
                n = sum(d.numel() * d.element_size() for d in local)
                if is_compiling():
                    runtime_input(lambda: self._count_bytes(n))
                else:
                    self._count_bytes(n)
                mean = local
            else:
                n = len(deltas)
                wide = [[d.float() if cd is not None else d for d in ds] for ds in deltas]
                mean = [sum(ds[1:], ds[0]) / n if n > 1 else ds[0] for ds in zip(*wide)]
                if cd is not None:  # the average arrives rounded to the dtype it travelled in
                    mean = [m.to(cd) for m in mean]
            mean = [m.to(g.dtype) for m, g in zip(mean, self.global_params)]
            for g, d in zip(self.global_params, mean):
                g.grad = d
        self.outer.step()
        with plast.no_grad():
            for g in self.global_params:
                g.grad = None
            for replica in self.replicas:
                for p, g in zip(replica, self.global_params):
                    p.copy_(g)

    def pseudo_gradients(self):
        """The current pseudo-gradients (global - local) of each replica, without communicating (for tests and
        logging)."""
        with plast.no_grad():
            return [
                [(g - p.detach().to(g.dtype)) for p, g in zip(replica, self.global_params)]
                for replica in self.replicas
            ]

    def state_dict(self):
        return {
            "inner": [opt.state_dict() for opt in self.inner],
            "outer": self.outer.state_dict(),
            "global_params": [g.detach().clone() for g in self.global_params],
            "local_step": self.local_step,
            "inner_steps": self.inner_steps,
            "bytes_sent": self.bytes_sent,
        }

    def load_state_dict(self, state):
        inner = state["inner"]
        if len(inner) != len(self.inner):
            raise ValueError(f"DiLoCo.load_state_dict: the state has {len(inner)} inner optimizers, this has "
                             f"{len(self.inner)}")  # fmt: skip
        for opt, s in zip(self.inner, inner):
            opt.load_state_dict(s)
        saved = state["global_params"]
        if len(saved) != len(self.global_params):
            raise ValueError(f"DiLoCo.load_state_dict: {len(saved)} global parameters, expected "
                             f"{len(self.global_params)}")  # fmt: skip
        with plast.no_grad():
            for g, s in zip(self.global_params, saved):
                g.copy_(s)
        self.outer.load_state_dict(state["outer"])
        self.local_step = int(state["local_step"])
        self.inner_steps = int(state.get("inner_steps", self.inner_steps))
        self.bytes_sent = int(state.get("bytes_sent", 0))


def _wide(dtype):
    return plast.float64 if dtype is plast.float64 else plast.float32
