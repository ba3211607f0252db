"""The op layer: argument checks, shape and dtype rules, and recording of nodes (DESIGN §2, §4).

Each module here is one family of ops. A module lists its public functions in ``__all__`` (they become
``plast.<name>``) and the Tensor methods it provides in ``TENSOR_METHODS`` (name -> function taking the tensor
first). Both are collected here, so adding an op family never means editing tensor.py or plast/__init__.py.
"""

import importlib
import pkgutil

_HELPERS = {"registry", "shapes"}


def op_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _HELPERS or info.name.startswith("_"):
            continue
        yield importlib.import_module(f"{__name__}.{info.name}")


def install_tensor_methods(cls):
    owner = {}
    for mod in op_modules():
        for name, fn in getattr(mod, "TENSOR_METHODS", {}).items():
            if name in owner or name in cls.__dict__:
                raise RuntimeError(
                    f"Tensor.{name} is defined twice ({owner.get(name, 'tensor.py')} and {mod.__name__})"
                )
            owner[name] = mod.__name__
            setattr(cls, name, fn)


def public_api():
    out = {}
    for mod in op_modules():
        for name in getattr(mod, "__all__", ()):
            if name in out and out[name] is not getattr(mod, name):
                raise RuntimeError(f"plast.{name} is exported by two op modules")
            out[name] = getattr(mod, name)
    return out
