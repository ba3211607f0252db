"""The model architectures a config may name (``model.arch``): an explicit registry that code extends.

A config file, and the ``config.yaml`` inside a checkpoint someone sent you, is data: it names an architecture,
it never names code to import. Only names registered here are accepted (``gpt``, plast.nn's GPT, is built in);
your own model is registered by your code before the config is loaded:

>>> from plast.experiment import register_arch, registered_archs
>>> def build_bigram(model_config, vocab_size):
...     import plast.nn as nn
...     return nn.Embedding(vocab_size, vocab_size)
>>> register_arch("bigram-demo", build_bigram)
>>> "bigram-demo" in registered_archs()
True

To use it with the ``plast`` command, run the command from a script of your own that registers it first:
``register_arch("mymodel", build); sys.exit(plast.experiment.cli.main())``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["build_arch", "register_arch", "registered_archs"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,99}$")


def _build_gpt(mcfg, vocab_size: int):
    import plast.nn as nn

    if not hasattr(nn, "GPT"):
        raise ImportError(
            "this plast-nn has no GPT (plast.nn.GPT / GPTConfig); update plast-nn, or register another "
            "architecture with plast.experiment.register_arch and name it in model.arch"
        )
    return nn.GPT(
        nn.GPTConfig(
            vocab_size=vocab_size,
            block_size=mcfg.block_size,
            n_layer=mcfg.n_layer,
            n_head=mcfg.n_head,
            n_embd=mcfg.n_embd,
            dropout=mcfg.dropout,
            bias=mcfg.bias,
        )
    )


_REGISTRY: dict[str, Callable] = {"gpt": _build_gpt}


def register_arch(name: str, builder: Callable, *, replace: bool = False) -> None:
    """Make ``model.arch: <name>`` build a model with ``builder(model_config, vocab_size)``.

    Names are letters, digits and ``_ . : -``; registering a taken name raises ValueError unless
    ``replace=True`` (``gpt`` included, so a typo never silently swaps the default model).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"register_arch: the name must be 1-100 letters, digits, '_', '.', ':' or '-' "
            f"(not starting with one of '.:-'), got {name!r}"
        )
    if not callable(builder):
        raise TypeError(
            f"register_arch: builder must be callable as builder(model_config, vocab_size), got "
            f"{type(builder).__name__}"
        )
    if name in _REGISTRY and not replace and _REGISTRY[name] is not builder:
        raise ValueError(f"register_arch: {name!r} is already registered; pass replace=True to replace it")
    _REGISTRY[name] = builder


def registered_archs() -> list[str]:
    """The names ``model.arch`` accepts, sorted."""
    return sorted(_REGISTRY)


def unknown_arch_message(name) -> str:
    """Why `name` is refused, and what to do (for ConfigError)."""
    return (
        f"model.arch {name!r} is not a registered architecture (registered: "
        f"{', '.join(repr(n) for n in registered_archs())}). A config or checkpoint names an architecture, it "
        "never imports code: register your model in your own code with "
        "plast.experiment.register_arch(name, builder) before loading the config"
    )


def build_arch(mcfg, vocab_size: int):
    """The model of ``mcfg.arch`` (a registered name) for a vocabulary of `vocab_size`."""
    builder = _REGISTRY.get(mcfg.arch)
    if builder is None:
        from plast.experiment.config import ConfigError

        raise ConfigError(unknown_arch_message(mcfg.arch))
    return builder(mcfg, vocab_size)
