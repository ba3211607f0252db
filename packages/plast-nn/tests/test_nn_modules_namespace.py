"""plast.nn.modules is laid out as torch.nn.modules: each submodule exists in torch under the same name,
each name it exports is in torch's submodule too, and is plast.nn's class itself."""

import importlib
import pkgutil

import torch

import plast.nn as nn
import plast.nn.modules as pmodules


def test_every_submodule_mirrors_torch():
    subs = [m.name for m in pkgutil.iter_modules(pmodules.__path__)]
    assert {
        "module",
        "linear",
        "conv",
        "rnn",
        "transformer",
        "activation",
        "loss",
        "normalization",
        "container",
    } <= set(subs)
    for sub in subs:
        pm = importlib.import_module(f"plast.nn.modules.{sub}")
        tm = importlib.import_module(f"torch.nn.modules.{sub}")
        for name in pm.__all__:
            assert hasattr(tm, name), f"torch.nn.modules.{sub} has no {name}"
            assert getattr(pm, name) is getattr(nn, name), name
            assert getattr(pmodules, name) is getattr(nn, name), name


def test_nn_classes_torch_has_are_reachable_where_torch_puts_them():
    # every plast.nn class that torch.nn also has lives in the plast.nn.modules submodule torch uses for it
    for name in dir(nn):
        obj = getattr(nn, name)
        if not isinstance(obj, type) or not issubclass(obj, nn.Module) or not hasattr(torch.nn, name):
            continue
        if name in ("Module",):
            continue
        where = getattr(torch.nn, name).__module__.rsplit(".", 1)[-1]
        sub = importlib.import_module(f"plast.nn.modules.{where}")
        assert getattr(sub, name, None) is obj, f"plast.nn.modules.{where}.{name}"
