"""Module: the base class of every layer and model, with torch.nn.Module's semantics (STYLE.md item 12).

Parameters, buffers and submodules live in three ordered dicts (`_parameters`, `_buffers`, `_modules`);
attribute assignment routes into them, so ``self.fc = Linear(2, 3)`` registers a submodule and
``self.w = Parameter(...)`` a parameter. ``state_dict`` / ``load_state_dict`` use torch's key names and order,
so a model ported from torch loads the same checkpoint.
"""

import itertools
import weakref
from collections import OrderedDict, namedtuple

import plast
from plast import Tensor
from plast.compiler import note_state, on_trace
from plast.errors import CheckpointError

from .parameter import Buffer, Parameter, _persistent_leaf, _rebind

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends: ``handle.remove()`` unregisters the hook (also as a
    context manager)."""

    _next_id = itertools.count()

    def __init__(self, *dicts):
        self.id = next(RemovableHandle._next_id)
        self._dicts = [weakref.ref(d) for d in dicts]

    def remove(self):
        for ref in self._dicts:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(OrderedDict):
    """An OrderedDict that can be weakly referenced (by the handles)."""


_ABSENT = object()

# Whether a @plast.jit trace is running: every module call asks, so the answer is kept here, set by the tracer
# (plast.compiler.on_trace), rather than fetched by a call each time.
_tracing = False


def _set_tracing(active):
    global _tracing
    _tracing = active


on_trace(_set_tracing)


class _Members(OrderedDict):
    """One of a module's `_parameters` / `_buffers` / `_modules`: an OrderedDict that also keeps each entry in
    its module's instance ``__dict__``.

    Why: ``self.weight`` in a forward is then an ordinary instance-dict hit. Without the copy, Python first
    fails its generic lookup (building an AttributeError and its message) and only then calls
    ``Module.__getattr__``: about 2 us per parameter read, a fifth of a small model's eager step. Every way to
    change the dict goes through the methods below, so the copy never disagrees with it. A name that the
    module's class defines (a method, a property, a class attribute) is never copied: such names were never
    reached through ``__getattr__``, and the instance dict must not shadow them.

    The module is held by a weak reference: a strong one would put every module in a reference cycle, and a
    dropped model's parameters would wait for the cyclic garbage collector instead of going back to the arena
    at once. Copies and pickles rebuild the dict around the copy's module (``__reduce__``)."""

    __slots__ = ("_owner",)

    def __init__(self, owner):
        super().__init__()
        self._owner = weakref.ref(owner) if owner is not None else None

    def _module(self):
        return self._owner() if self._owner is not None else None

    def _mirror(self, name, value):
        owner = self._module()
        if owner is not None and getattr(type(owner), name, _ABSENT) is _ABSENT:
            owner.__dict__[name] = value

    def _unmirror(self, name):
        owner = self._module()
        if owner is not None and getattr(type(owner), name, _ABSENT) is _ABSENT:
            owner.__dict__.pop(name, None)

    def __setitem__(self, name, value):
        OrderedDict.__setitem__(self, name, value)
        if isinstance(name, str):
            self._mirror(name, value)

    def __delitem__(self, name):
        OrderedDict.__delitem__(self, name)
        if isinstance(name, str):
            self._unmirror(name)

    def pop(self, name, *default):
        had = name in self
        value = OrderedDict.pop(self, name, *default)
        if had and isinstance(name, str):
            self._unmirror(name)
        return value

    def popitem(self, last=True):
        name, value = OrderedDict.popitem(self, last)
        if isinstance(name, str):
            self._unmirror(name)
        return name, value

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return OrderedDict.__getitem__(self, name)

    def update(self, *args, **kwargs):
        for name, value in OrderedDict(*args, **kwargs).items():
            self[name] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def clear(self):
        for name in list(self):
            del self[name]

    def __reduce__(self):
        # copies rebuild through __setitem__ (so the copy's module gets its entries), owner first
        return (_rebuild_members, (self._module(),), None, None, iter(OrderedDict.items(self)))

    def copy(self):
        # a detached snapshot (what torch's OrderedDict.copy gives): a plain OrderedDict
        return OrderedDict(self)


def _rebuild_members(owner):
    return _Members(owner)


def _check_name(kind, name, module):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


def _indent(text, n):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * n
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


class Module:
    """Base class for all layers and models: subclass it, assign layers and parameters in ``__init__`` and
    compute in ``forward``.

    >>> class Net(plast.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = plast.nn.Linear(2, 1)
    ...     def forward(self, x):
    ...         return self.fc(x)
    >>> list(Net().state_dict())
    ['fc.weight', 'fc.bias']
    """

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ takes none "
                "(pass your arguments to your own __init__, then call super().__init__())"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = _Members(self)
        d["_buffers"] = _Members(self)
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _Members(self)
        d["_forward_hooks"] = _HookDict()
        d["_forward_hooks_with_kwargs"] = _HookDict()
        d["_forward_pre_hooks"] = _HookDict()
        d["_forward_pre_hooks_with_kwargs"] = _HookDict()

    # ---- registration ----
    def _require_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name, param):
        """Add a parameter (or None, a declared but absent one) under `name`."""
        self._require_init("parameter")
        _check_name("parameter", name, self)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(plast.nn.Parameter or None required)"
            )
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                f"explicitly. To express '{name}' as a function of another Tensor, compute the value in the "
                "forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a tensor that is state but not a parameter (running statistics); ``persistent=False`` keeps it
        out of ``state_dict``."""
        self._require_init("buffer")
        _check_name("buffer", name, self)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (plast.Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module under `name` (``self.name = module`` does the same)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._require_init("module")
        _check_name("module", name, self)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' (plast.nn.Parameter or None "
                    "expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, params, self._buffers, self._non_persistent_buffers_set)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' (plast.nn.Module or None "
                    "expected)"
                )
            self._modules[name] = value
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._remove_from(name, d, params, self._modules)
            self.register_buffer(name, value.data, value.persistent)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' (plast.Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, *containers):
        for c in containers:
            if name in c:
                if isinstance(c, set):
                    c.discard(name)
                else:
                    del c[name]

    def __getattr__(self, name):
        # reached only for names the instance dict lacks: entries of _Members are there already, except
        # those whose name the class also defines (see _Members) and stores replaced by hand
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __copy__(self):
        # copy.copy: a new module over the same parameters, buffers and children. Unlike torch (where a shallow
        # copy shares the three dicts themselves), the copy gets dicts of its own: each mirrors its entries
        # into one module's __dict__ (see _Members), and a shared one would leave the other module's stale
        new = type(self).__new__(type(self))
        d = new.__dict__
        d.update(self.__dict__)
        for key in ("_parameters", "_buffers", "_modules"):
            old = self.__dict__.get(key)
            if isinstance(old, _Members):
                store = d[key] = _Members(new)
                for name, value in OrderedDict.items(old):
                    store[name] = value
        return new

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- traversal ----
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mod_prefix, mod in mods:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) pairs, each parameter once (tied weights appear under their first name)."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Every parameter once, in registration order (what an optimizer takes)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(qualified name, module) for this module and every descendant, depth first, each module once."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        """The descendant at dotted path `target` (``""`` is this module)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not isinstance(mod, Module) or item not in mod._modules:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    def apply(self, fn):
        """Call fn on every submodule (children first) and then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ----
    def train(self, mode=True):
        """Set training mode (affects Dropout, BatchNorm) here and in every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset every parameter's .grad: to None (default, as torch) or to zeros."""
        for p in self.parameters():
            if set_to_none:
                # assigned even when None: inside a @plast.jit trace, the assignment is what tells backward that
                # the step's gradient does not depend on the .grad a call starts with (one plan for every call)
                p.grad = None
            elif p.grad is not None:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                with plast.no_grad():
                    p.grad.zero_()

    # ---- dtype and device ----
    def _apply(self, fn):
        """Replace every parameter's, gradient's and buffer's value by fn(value), keeping the Parameter objects
        (torch's ``param.data = fn(param)``: optimizers and tied modules still hold the same objects)."""
        for m in self.children():
            m._apply(fn)
        with plast.no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p.detach())
                if new.dtype != p.dtype or new.device != p.device:
                    _rebind(p, _persistent_leaf(new))
                g = p.grad
                if g is not None:
                    new = fn(g)
                    if new.dtype != g.dtype or new.device != g.device:
                        p.grad = _persistent_leaf(new)
            for name, b in self._buffers.items():
                if b is not None:
                    new = fn(b)
                    # a converted buffer may be an op result: give it persistent memory, as parameters have
                    self._buffers[name] = b if new is b else _persistent_leaf(new)
        return self

    def to(self, *args, **kwargs):
        """Move parameters, their gradients and buffers to a device and/or cast the floating ones to a dtype, in
        place (``to("cuda")``, ``to(plast.float64)``, ``to("cuda", plast.float64)``, ``to(tensor)``); returns
        self. Parameter objects keep their identity: an optimizer made before the move still holds them."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        if len(args) > 2:
            raise TypeError(f"to() takes at most 2 positional arguments (device, dtype), got {len(args)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, plast.dtype):
                dtype = a
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        if device is not None:
            device = plast.device(f"cuda:{device}" if isinstance(device, int) else device)

        def convert(t):
            cast = dtype if dtype is not None and t.dtype.is_floating_point and t.dtype != dtype else None
            if device is None or t.device == device:
                return t if cast is None else t.to(cast)
            # a cast next to a move runs on the CPU side (before an upload, after a download): the CPU has a
            # kernel for every cast, and no device kernel is needed to move a model
            if cast is not None and t.device.type == "cpu":
                return t.to(cast).to(device)
            out = t.to(device)
            return out if cast is None else out.to(cast)

        return self._apply(convert)

    def float(self):
        return self.to(plast.float32)

    def double(self):
        return self.to(plast.float64)

    def cpu(self):
        """Move every parameter, gradient and buffer to the CPU (in place); returns self."""
        return self.to("cpu")

    def cuda(self, device=None):
        """Move every parameter, gradient and buffer to the GPU (in place); returns self. plast drives one GPU,
        ``cuda:0``."""
        dev = plast.device(
            "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device
        )
        if dev.type != "cuda":
            raise ValueError(f"Module.cuda(): expected a CUDA device, got {dev}")
        return self.to(dev)

    # ---- state dicts ----
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer by qualified name (``fc.weight``),
        detached (they share memory with the module, as in torch)."""
        if args:  # torch's positional (destination, prefix, keep_vars)
            names = ("destination", "prefix", "keep_vars")
            vals = dict(zip(names, args))
            destination = vals.get("destination", destination)
            prefix = vals.get("prefix", prefix)
            keep_vars = vals.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        persistent_buffers = {
            k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set
        }
        local = {
            k: v
            for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
            if v is not None
        }
        for name, dst in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                if hasattr(src, "__array__") and not isinstance(src, (list, tuple)):
                    src = plast.tensor(src)
                else:
                    error_msgs.append(
                        f'While copying the parameter named "{key}", expected plast.Tensor or Tensor-like object '
                        f"from checkpoint but received {type(src)}"
                    )
                    continue
            if tuple(src.shape) != tuple(dst.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {plast.Size(src.shape)} from "
                    f"checkpoint, the shape in current model is {plast.Size(dst.shape)}."
                )
                continue
            try:
                with plast.no_grad():
                    if src.device != dst.device:  # a checkpoint read on the host into a model on the GPU
                        src = src.to(dst.device)
                    dst.copy_(src)
            except Exception as e:  # noqa: BLE001 - reported with the key, as torch does
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{tuple(dst.shape)} and whose dimensions in the checkpoint are {tuple(src.shape)}, "
                    f"an exception occurred : {e.args}."
                )
        for key in state_dict:
            if not key.startswith(prefix):
                continue
            rest = key[len(prefix) :]
            head = rest.split(".", 1)[0]
            if head not in self._modules and rest not in local:
                unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from `state_dict` into this module's parameters and buffers (in place).

        Returns ``(missing_keys, unexpected_keys)``. With ``strict=True`` (default) any missing or unexpected
        key raises; a shape mismatch always raises. The error is a ``plast.CheckpointError``, a RuntimeError
        as torch raises.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        if assign:
            raise NotImplementedError(
                "load_state_dict(assign=True) is not supported yet; values are copied in place"
            )
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected))
                )
            if missing:
                errors.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing))
                )
        if errors:
            raise CheckpointError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(self._get_name(), "\n\t".join(errors))
            )
        return _IncompatibleKeys(missing, unexpected)

    # ---- hooks and calling ----
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before forward (``hook(module, args, kwargs)`` with ``with_kwargs``); a
        returned value replaces the arguments. Returns a handle with ``remove()``."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args, output)`` after forward (``hook(module, args, kwargs, output)`` with
        ``with_kwargs``); a returned value replaces the output. Returns a handle with ``remove()``."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def _jit_key(self):
        """What a @plast.jit trace of this module depends on beyond its inputs (a change retraces): the training
        flag and the identity of each parameter's and buffer's memory (``to(dtype)`` or ``.data = ...`` moves it)."""
        params, buffers = self._parameters, self._buffers
        if not params and not buffers:  # most modules of a model (activations, dropout, containers)
            return self.training
        return (
            self.training,
            tuple([(id(p), id(p._storage)) if p is not None else None for p in params.values()]),
            tuple([(id(b), id(b._storage)) if b is not None else None for b in buffers.values()]),
        )

    def __call__(self, *args, **kwargs):
        if _tracing:
            note_state(self, self._jit_key)
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                            f"but got {res}."
                        )
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    # ---- printing ----
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside this module's parentheses in repr (override it in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): {_indent(repr(m), 2)}" for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"
