"""plast.torch: run PyTorch programs on plast unchanged, by resolving ``import torch`` to plast.

``python -m plast.torch train.py --lr 3e-4`` runs ``train.py`` with ``torch`` and its submodules resolved to
plast's modules (``sys.argv`` is ``["train.py", "--lr", "3e-4"]``, as ``python train.py`` would set it). In a
notebook or REPL, call :func:`install` before the first ``import torch``.

This is aliasing, nothing more: ``torch.nn`` *is* ``plast.nn``. A torch name plast lacks raises AttributeError
(``plast does not implement torch.fft``) and a torch submodule plast lacks raises ModuleNotFoundError, except the
few that scripts import at the top but use only on request (``torch.onnx``, ``torch.jit``, ``torch.hub``): those
import, and their functions raise NotImplementedError naming the feature when called.

>>> import plast.torch, sys
>>> plast.torch.install()
>>> import torch
>>> torch.ones(2).tolist(), torch.float32 is plast.float32
([1.0, 1.0], True)
>>> plast.torch.uninstall()
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

import plast as _plast

SPAWN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_spawn_path")

# torch module -> the plast module it is (plast.nn, plast.optim and plast.data ship in other distributions:
# they are imported on first use, so plast-core works, and ``import torch`` works, without them)
ALIASES = {
    "torch.nn": "plast.nn",
    "torch.nn.functional": "plast.nn.functional",
    "torch.nn.init": "plast.nn.init",
    "torch.nn.utils": "plast.nn.utils",
    "torch.nn.utils.rnn": "plast.nn.utils.rnn",
    "torch.nn.utils.clip_grad": "plast.nn.utils.clip_grad",
    "torch.nn.parallel": "plast.nn.parallel",
    "torch.nn.modules": "plast.nn.modules",
    "torch.nn.parameter": "plast.nn.parameter",
    "torch.optim": "plast.optim",
    "torch.optim.lr_scheduler": "plast.optim.lr_scheduler",
    "torch.utils.data": "plast.data",
    "torch.utils.data.dataloader": "plast.data.dataloader",
    "torch.utils.data.dataset": "plast.data.dataset",
    "torch.utils.data.sampler": "plast.data.sampler",
    "torch.utils.data.distributed": "plast.data.sampler",  # DistributedSampler
    "torch.autograd": "plast.autograd",
    "torch.autograd.function": "plast.autograd.function",  # Function, once_differentiable
    "torch.cuda": "plast.cuda",
    "torch.amp": "plast.amp",
    "torch.accelerator": "plast.accelerator",
    "torch.backends": "plast.backends",
    "torch.distributed": "plast.distributed",
    "torch.linalg": "plast.linalg",
    "torch.profiler": "plast.profiler",
    "torch.random": "plast.random",
    "torch.serialization": "plast.serialization",
}

# torch submodules that scripts import at the top and use only on request (export, tracing, profiling, model
# hubs): they import, and calling anything in them raises NotImplementedError naming it
ON_REQUEST = ("torch.onnx", "torch.jit", "torch.hub")

# plast's distributions, to name the missing one in an ImportError
_DISTRIBUTIONS = {"plast.nn": "plast-nn", "plast.optim": "plast-nn", "plast.data": "plast-data"}


class _Unimplemented:
    """A callable standing for a torch function plast lacks: calling it raises NotImplementedError."""

    def __init__(self, qualname: str):
        self._qualname = qualname

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"plast does not implement {self._qualname}")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unimplemented(f"{self._qualname}.{name}")

    def __repr__(self):
        return f"<not implemented by plast: {self._qualname}>"


class _OnRequestModule(types.ModuleType):
    """``torch.onnx`` and friends: importable; every function in them raises NotImplementedError when called."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unimplemented(f"{self.__name__}.{name}")


class _TorchModule(types.ModuleType):
    """``torch``: plast's namespace, and torch's submodules resolved through the finder."""

    def __getattr__(self, name):
        try:
            return getattr(_plast, name)
        except AttributeError:
            pass
        full = f"torch.{name}"
        if full in ALIASES or full in ON_REQUEST or full == "torch.utils":
            return importlib.import_module(full)
        raise AttributeError(f"plast does not implement {full}")

    def __dir__(self):
        return sorted(set(dir(_plast)) | {n.split(".")[1] for n in ALIASES})


class _UtilsModule(types.ModuleType):
    """``torch.utils``: only ``data`` (plast.data) and ``tensorboard`` (tensorboardX) resolve."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("data", "tensorboard"):
            return importlib.import_module(f"torch.utils.{name}")
        raise AttributeError(f"plast does not implement torch.utils.{name}")


def _tensorboard() -> types.ModuleType:
    try:
        from tensorboardX import SummaryWriter  # noqa: PLC0415 -- optional, only on request
    except ImportError as e:
        raise ImportError(
            "torch.utils.tensorboard runs on tensorboardX under plast, and tensorboardX is not installed "
            "(pip install tensorboardX)",
            name="torch.utils.tensorboard",
        ) from e
    mod = types.ModuleType("torch.utils.tensorboard")
    mod.SummaryWriter = SummaryWriter
    return mod


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        name = spec.name
        if name == "torch":
            mod = _TorchModule("torch", __doc__)
        elif name == "torch.utils":
            mod = _UtilsModule("torch.utils")
        elif name in ON_REQUEST:
            mod = _OnRequestModule(name)
        elif name == "torch.utils.tensorboard":
            mod = _tensorboard()
        else:  # an alias: a placeholder, swapped for the plast module in exec_module
            return None
        if name in ("torch", "torch.utils"):
            mod.__path__ = []
        return mod

    def exec_module(self, module):
        name = module.__name__
        target = ALIASES.get(name)
        if target is None:
            return
        try:
            real = importlib.import_module(target)
        except ModuleNotFoundError as e:
            dist = _DISTRIBUTIONS.get(target.rsplit(".", 1)[0]) or _DISTRIBUTIONS.get(target)
            if dist is None or e.name not in (target, target.rsplit(".", 1)[0]):
                raise
            raise ModuleNotFoundError(
                f"{name} is {target} under plast, which ships in the {dist} distribution: it is not installed",
                name=name,
            ) from e
        # the import system returns what sys.modules holds after exec_module: the plast module itself
        sys.modules[name] = real


class _Finder(importlib.abc.MetaPathFinder):
    _loader = _Loader()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        known = fullname in ALIASES or fullname in ON_REQUEST
        if not known and fullname not in ("torch", "torch.utils", "torch.utils.tensorboard"):
            raise ModuleNotFoundError(f"plast does not implement {fullname}", name=fullname)
        is_pkg = fullname in ("torch", "torch.utils")
        return importlib.machinery.ModuleSpec(fullname, self._loader, is_package=is_pkg)


def installed() -> bool:
    """True when ``import torch`` resolves to plast."""
    return any(isinstance(f, _Finder) for f in sys.meta_path)


def install() -> None:
    """Resolve ``import torch`` (and its submodules) to plast from now on, in this process.

    Call it before the first ``import torch``; a torch already imported is left in place (ImportError).

    >>> import plast.torch
    >>> plast.torch.install()
    >>> import torch.nn.functional as F  # doctest: +SKIP
    """
    if installed():
        return
    mod = sys.modules.get("torch")
    if mod is not None and not isinstance(mod, _TorchModule):
        raise ImportError(
            "the real torch is already imported in this process: call plast.torch.install() first"
        )
    sys.meta_path.insert(0, _Finder())
    # processes started with spawn or forkserver (DataLoader workers) get this sys.path: their first `import
    # torch` installs the alias there too (_spawn_path/torch/__init__.py)
    if SPAWN_PATH not in sys.path:
        sys.path.insert(0, SPAWN_PATH)


def uninstall() -> None:
    """Undo :func:`install`: drop the finder and every ``torch`` entry it put in ``sys.modules``."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    sys.path[:] = [p for p in sys.path if p != SPAWN_PATH]
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]


__all__ = ["ALIASES", "ON_REQUEST", "install", "installed", "uninstall"]
