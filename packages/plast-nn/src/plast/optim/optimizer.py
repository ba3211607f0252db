"""Optimizer: torch.optim.Optimizer's bookkeeping (param_groups, state, state_dict) around core's fused updates.

Subclasses gather every parameter that has a gradient, across all groups, and call one fused plast-core op per
device (``plast.sgd_update_``, ``plast.adam_update_``, ``plast.nadam_update_``, ...) that updates parameters and
state in place in one pass.

Hyperparameters travel as tensors: each group owns a persistent float64 tensor of its numeric hyperparameters
(``[lr, ...]``) on its parameters' device (all of a group's parameters share one; state is made there too),
refreshed from ``param_groups`` before every update (so a scheduler's change to
``group['lr']`` takes effect), and step counts are tensors the kernel increments. A plan replayed by
``@plast.jit`` therefore never holds a learning rate or a step count as a constant; before a replay, call
``_refresh_hyper()`` (what ``step()`` does first) to carry Python-side changes into those tensors.

Eager steps replay: the first eager ``step()`` records the fused calls its ``_update`` makes, and later steps
hand this step's gradients to the same calls (core's ``plast.plast.compiler.UpdateReplay``) instead of gathering
parameters, state and hyperparameters in Python again, as long as nothing they were built from changed: the
replay checks the param lists, which parameters have gradients, every state entry and every option of every
group (other than the hyperparameters, which it reads from their tensors). Anything else that changes the
update's structure drops the replay here: a new hyperparameter tensor, a hyperparameter becoming zero or
nonzero, ``add_param_group``, ``load_state_dict``, moved state. ``PLAST_PLAN_CACHE=0`` turns replays off.
"""

from collections import defaultdict
from copy import deepcopy
from itertools import chain

import plast
from plast import Tensor
from plast.errors import DeviceMismatchError

_CPU = plast.device("cpu")


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class of optimizers: ``param_groups`` (dicts with 'params' and hyperparameters), ``state`` (per
    parameter), ``zero_grad``, ``step``, ``state_dict`` / ``load_state_dict`` in torch's format.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> opt = plast.optim.SGD([w], lr=0.1)
    >>> [len(g["params"]) for g in opt.param_groups]
    [1]
    """

    # the group keys that make up the hyperparameter tensor, in order (set by subclasses)
    _hyper_keys = ()

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self._hyper_cache = {}
        self._replay = None  # the last eager step's fused calls, replayed while valid (module docstring)
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                f"{type(params).__name__}"
            )
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters with its own hyperparameters (missing ones take the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of tensors "
                "in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}"
                )
            if not (p.is_leaf or p._retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            raise ValueError(
                "optimizer contains a parameter group with duplicate parameters; each parameter can appear once"
            )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self._group_device(param_group, len(self.param_groups))
        self.param_groups.append(param_group)
        self._replay = None

    # ---- gradients and steps ----
    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every optimized parameter: to None (default, as torch) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    # assigned even when None: inside a @plast.jit trace, the assignment is what tells backward that
                    # the step's gradient does not depend on the .grad a call starts with (one plan for every call)
                    p.grad = None
                elif p.grad is not None:
                    if p.grad.grad_fn is not None:
                        p.grad = p.grad.detach()
                    with plast.no_grad():
                        p.grad.zero_()

    def step(self, closure=None):
        """Update every parameter that has a gradient; `closure` (re-evaluating the loss) is called first
        under enable_grad, and its result returned."""
        loss = None
        if closure is not None:
            with plast.enable_grad():
                loss = closure()
        # Under @plast.jit this is a runtime input: the replay refreshes the hyperparameter tensors from
        # param_groups before every call, so schedulers keep working without retracing.
        plast.compiler.runtime_input(self._refresh_hyper)
        # GradScaler.step sets found_inf (torch's contract for _step_supports_amp_scaling): a new tensor each
        # eager step, so such a step neither replays nor is captured (a replay would keep the old one)
        amp = getattr(self, "found_inf", None) is not None
        replay = self._replay
        if not amp and replay is not None and replay.run():
            return loss
        self._replay = None
        with plast.no_grad():
            if amp or plast.compiler.is_compiling() or not plast.compiler.update_replays_enabled():
                self._update()
            else:
                with plast.compiler.capture_updates() as calls:
                    self._update()
                self._replay = self._make_replay(calls)
        return loss

    def _make_replay(self, calls):
        """An UpdateReplay of `calls` (this step's fused updates) watching what they were built from, or None
        when they cannot be replayed (none made, or one on another device than the CPU)."""
        if not calls:
            return None
        skip = ("params",) + tuple(self._hyper_keys)
        params = [p for g in self.param_groups for p in g["params"]]
        sequences = [(self.param_groups, list(self.param_groups))]
        attrs = [(self, "state", self.state), (self, "param_groups", self.param_groups)]
        watch = []
        for g in self.param_groups:
            sequences.append((g["params"], list(g["params"])))
            watch.extend((g, k, v) for k, v in g.items() if k not in skip)
            watch.append((g, "params", g["params"]))
        for p in params:
            st = self.state.get(p)
            if st is not None:
                watch.append((self.state, p, st))
                watch.extend((st, k, v) for k, v in st.items())
        try:
            return plast.compiler.UpdateReplay(calls, sequences, params, watch, attrs)
        except ValueError:
            return None

    def _amp_found_inf(self):
        """GradScaler's found_inf during its step() (torch's attribute), else None: the fused update ops take
        it as an input and skip, as data, while it is nonzero (classes that do say _step_supports_amp_scaling)."""
        return getattr(self, "found_inf", None)

    def _update(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement its update")

    # ---- devices ----
    def _group_device(self, group, index=None):
        """The device all of a group's parameters are on: the fused update runs there, and the group's state
        and hyperparameter tensors live there. A group that mixes devices raises DeviceMismatchError."""
        params = group["params"]
        if not params:
            return _CPU
        dev = params[0].device
        for i, p in enumerate(params):
            if p.device != dev:
                where = f"parameter group {index}" if index is not None else "a parameter group"
                raise DeviceMismatchError(
                    f"{type(self).__name__}: {where} mixes devices: params[0] is on {dev} but params[{i}] is "
                    f"on {p.device} (shape {tuple(p.shape)}); every parameter of a group must be on one device "
                    "(move the whole model with model.to(device) before making the optimizer)"
                )
        return dev

    def _move_state(self, group, device):
        """Move a group's state tensors to `device`, where its parameters now are (the model was moved after the
        optimizer was made): the state follows its parameter, as ``load_state_dict`` places it."""
        self._replay = None
        with plast.no_grad():
            for p in group["params"]:
                st = self.state.get(p)
                if not st:
                    continue
                for k, v in st.items():
                    if isinstance(v, Tensor) and v.device != device:
                        st[k] = v.to(device)

    # ---- hyperparameters as tensors ----
    def _hyper_values(self, group):
        vals = []
        for k in self._hyper_keys:
            v = group[k]
            if isinstance(v, (tuple, list)):
                vals.extend(float(x) for x in v)
            else:
                vals.append(float(v.item() if isinstance(v, Tensor) else v))
        return tuple(vals)

    def _refresh_hyper(self):
        """Write each group's current hyperparameters into its persistent float64 tensor (in place, only when
        they changed). The tensor lives on the group's device (the fused update reads it there); a group whose
        parameters moved gets a new one, and its state is moved along."""
        cache = self._hyper_cache
        keys = self._hyper_keys
        stale = len(cache) != len(self.param_groups)
        for i, group in enumerate(self.param_groups):
            entry = cache.get(id(group))
            params = group["params"]
            dev = params[0].device if params else _CPU
            if entry is not None and entry[0] is group and (entry[3] is dev or entry[3] == dev):
                # fast path: the group's raw values are the very ones last seen (a Tensor value may have
                # changed in place, so a group holding one always takes the full read)
                raw = tuple(map(group.__getitem__, keys))  # (no comprehension frame)
                if raw == entry[4] and not entry[5]:
                    continue
                vals = self._hyper_values(group)
                if entry[2] != vals:
                    with plast.no_grad():
                        entry[1].copy_(plast.tensor(vals, dtype=plast.float64, device=dev))
                    if [v == 0 for v in vals] != [v == 0 for v in entry[2]]:
                        self._replay = None  # a hyperparameter turned zero or nonzero: the calls may differ
                    entry[2] = vals
                entry[4], entry[5] = raw, any(isinstance(v, Tensor) for v in raw)
                continue
            vals = self._hyper_values(group)
            dev = self._group_device(group, i)
            self._move_state(group, dev)
            raw = tuple(map(group.__getitem__, keys))
            cache[id(group)] = [
                group,
                plast.tensor(vals, dtype=plast.float64, device=dev),
                vals,
                dev,
                raw,
                any(isinstance(v, Tensor) for v in raw),
            ]
            self._replay = None
            stale = True
        if stale:
            live = {id(g) for g in self.param_groups}
            for key in [k for k in cache if k not in live]:
                del cache[key]

    def _hyper(self, group):
        return self._hyper_cache[id(group)][1]

    # ---- state dicts ----
    def state_dict(self):
        """{'state': {param index: {...}}, 'param_groups': [{..., 'params': [indices]}]}, as torch writes it.
        State tensors are returned as they are (not copied), as in torch."""
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def _cast_state(self, param, key, value):
        if isinstance(value, dict):
            return {k: self._cast_state(param, k, v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            # lists of tensors (LBFGS's history) get fresh lists and tensors, never ones shared with the source
            return type(value)(self._cast_state(param, key, v) for v in value)
        # state lives on its parameter's device (the fused update reads it there), as torch's load places it
        if key == "step":
            v = value.item() if hasattr(value, "item") and not isinstance(value, (int, float)) else value
            return plast.tensor(float(v), dtype=plast.float64, device=param.device)
        if isinstance(value, Tensor) or (
            hasattr(value, "__array__") and not isinstance(value, (list, tuple))
        ):
            t = value if isinstance(value, Tensor) else plast.tensor(value)
            with plast.no_grad():
                t = t.detach()
                if t.device != param.device and t.device.type != "cpu":
                    t = t.to("cpu")  # casts below run on the host: the CPU has a kernel for each
                if t.dtype.is_floating_point and param.dtype.is_floating_point:
                    t = t.to(param.dtype)
                moved = t.to(param.device)
                return moved if moved is not t else t.clone()  # a transfer already made a fresh copy
        return value

    def load_state_dict(self, state_dict):
        """Load a state dict made by ``state_dict()`` (this optimizer's class and layout of groups); tensors are
        copied into fresh persistent memory."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(s["params"] for s in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        )
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = self._cast_state(p, None, v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups
        self._hyper_cache = {}
        self._replay = None
        self._after_load()

    def _after_load(self):
        """Hook for subclasses whose private bookkeeping depends on the state."""

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"
