"""Experiment configuration: five dataclass sections (model, data, optim, train, run) read from YAML.

A config file is a mapping of sections to mappings of keys; anything it leaves out keeps the default of
``default.yaml`` (shipped with this package, printed by ``plast train --show``). Command-line overrides are
dotted ``section.key=value`` pairs whose values are parsed as YAML scalars (``optim.lr=1e-3``,
``model.bias=true``, ``run.name=null``). Unknown sections or keys and values of the wrong type raise
``ConfigError`` naming the key and, for a misspelling, the closest known key.

>>> cfg = load_config(overrides=["model.n_layer=2", "optim.lr=3e-4"])
>>> cfg.model.n_layer, cfg.optim.lr
(2, 0.0003)
>>> load_config(overrides=["model.n_layers=2"])
Traceback (most recent call last):
...
plast.experiment.config.ConfigError: override 'model.n_layers=2': unknown key 'model.n_layers' (did you mean 'model.n_layer'?)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from dataclasses import dataclass, field
from importlib import resources

import yaml

__all__ = [
    "Config",
    "ConfigError",
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
    "default_config_text",
    "dump_config",
    "load_config",
]


class ConfigError(ValueError):
    """A config file or override that names an unknown key or gives a value of the wrong type."""


@dataclass
class ModelConfig:
    """The GPT (``plast.nn.GPTConfig``); ``vocab_size`` comes from the tokenizer."""

    arch: str = "gpt"  # a registered architecture (plast.experiment.register_arch); "gpt" is built in
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    dropout: float = 0.1
    bias: bool = False


@dataclass
class DataConfig:
    corpus: str = "python_docs"  # "python_docs", or the path of a UTF-8 text file
    tokenizer: str = "bpe"  # "bpe" or "char"
    vocab_size: int = 1024  # BPE only
    val_fraction: float = 0.1
    stride: int = 1  # between training windows (1: every offset, as nanoGPT's random batches)
    num_workers: int = 0
    cache: bool = True  # keep the trained tokenizer and the token ids under run.dir/cache


@dataclass
class OptimConfig:
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # 0 turns clipping off


@dataclass
class TrainConfig:
    max_steps: int = 800
    batch_size: int = 32
    grad_accum: int = 1
    eval_interval: int = 100
    eval_batches: int = 4
    log_interval: int = 10
    checkpoint_interval: int = 0  # 0: at every evaluation
    keep_last: int = 2
    early_stopping_patience: int = 0  # evaluations without improvement before stopping; 0 turns it off
    early_stopping_min_delta: float = 0.0
    seed: int = 1337
    num_threads: int | None = None
    jit: bool = True
    # fp32; bf16 (plast.autocast: products in bfloat16, parameters float32); fp16 (autocast in float16 with a
    # GradScaler, jitted too; with strategy=diloco only with train.jit=false)
    precision: str = "fp32"
    # ranks training together (plast train --nproc N starts them with mpiexec). batch_size stays the batch of one
    # optimizer step: each rank computes batch_size / nproc of its rows.
    nproc: int = 1
    # ddp: gradients averaged every step (DistributedDataParallel); diloco: each rank takes inner_steps AdamW
    # steps alone, then the pseudo-gradients are averaged (plast.optim.DiLoCo)
    strategy: str = "ddp"
    inner_steps: int = 50
    # DiLoCo's outer optimizer: SGD on the averaged pseudo-gradient (the paper's defaults: lr 0.7, Nesterov
    # momentum 0.9; lr 1 with momentum 0 is plain parameter averaging every inner_steps steps)
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    sample_tokens: int = 200
    sample_prompt: str = "The "
    sample_temperature: float = 0.8
    sample_top_k: int | None = 40


@dataclass
class RunConfig:
    dir: str = "plast-runs"
    name: str | None = None  # default: a timestamp
    db: str | None = None  # default: <dir>/runs.db
    tensorboard: bool = False  # needs tensorboardX
    plot: bool = True


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}


def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {name: hints[name] for name in _SECTIONS}


def default_config_text() -> str:
    """The text of the packaged ``default.yaml``."""
    return resources.files("plast.experiment").joinpath("default.yaml").read_text(encoding="utf-8")


def _did_you_mean(name: str, known, prefix: str = "") -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else f" (known: {', '.join(sorted(known))})"


def _type_name(tp) -> str:
    args = typing.get_args(tp)
    if args:
        return " or ".join("null" if a is type(None) else a.__name__ for a in args)
    return tp.__name__


def _coerce(key: str, value, tp):
    """`value` checked (and, for float from int or a numeric string, converted) against the annotation `tp`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        for opt in options:
            if opt is type(None):
                continue
            try:
                return _coerce(key, value, opt)
            except ConfigError:
                pass
        raise ConfigError(f"{key} must be {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # NOTE: YAML 1.1 (PyYAML) reads "1e-3" as a string (it wants "1.0e-3"); accept it as a number.
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    else:  # pragma: no cover - every field has one of the types above
        raise TypeError(f"unsupported config type {tp!r} for {key}")
    raise ConfigError(f"{key} must be {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _apply(cfg: Config, data, source: str) -> None:
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a config is a mapping of sections ({', '.join(_SECTIONS)}), got {data!r}"
        )
    types_ = _section_types()
    for section, values in data.items():
        if section not in types_:
            raise ConfigError(f"{source}: unknown section '{section}'" + _did_you_mean(str(section), types_))
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section '{section}' must be a mapping of keys, got {values!r}")
        for key, value in values.items():
            _set(cfg, section, key, value, source)


def _set(cfg: Config, section: str, key: str, value, source: str) -> None:
    obj = getattr(cfg, section)
    hints = typing.get_type_hints(type(obj))
    if key not in hints:
        raise ConfigError(
            f"{source}: unknown key '{section}.{key}'" + _did_you_mean(str(key), hints, prefix=f"{section}.")
        )
    setattr(obj, key, _coerce(f"{source}: {section}.{key}", value, hints[key]))


def _parse_override(text: str) -> tuple[str, str, object]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value (e.g. model.n_layer=6)")
    path, raw = text.split("=", 1)
    parts = path.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(
            f"override {text!r}: the key must be section.key (e.g. optim.lr=1e-3), got {path!r}"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: the value is not a YAML scalar ({e})") from None
    if isinstance(value, (dict, list)):
        raise ConfigError(f"override {text!r}: the value must be a scalar, got {type(value).__name__}")
    return parts[0], parts[1], value


def _check(cfg: Config) -> None:
    """Every value's range (the types were checked when it was set); raises ConfigError naming the key."""
    import math

    from plast.experiment.archs import registered_archs, unknown_arch_message

    def need(cond, msg):
        if not cond:
            raise ConfigError(msg)

    def at_least(section, key, low):
        v = getattr(getattr(cfg, section), key)
        need(v >= low, f"{section}.{key} must be >= {low}, got {v!r}")

    def finite(section, key):
        v = getattr(getattr(cfg, section), key)
        need(math.isfinite(v), f"{section}.{key} must be a finite number, got {v!r}")

    m, d, o, t, r = cfg.model, cfg.data, cfg.optim, cfg.train, cfg.run
    need(m.arch in registered_archs(), unknown_arch_message(m.arch))
    for key in ("n_layer", "n_head", "n_embd", "block_size"):
        at_least("model", key, 1)
    need(
        m.n_embd % m.n_head == 0, f"model.n_embd ({m.n_embd}) must be a multiple of model.n_head ({m.n_head})"
    )
    need(0.0 <= m.dropout < 1.0, f"model.dropout must be in [0, 1), got {m.dropout}")
    need(d.corpus != "", "data.corpus must be 'python_docs' or the path of a UTF-8 text file, got ''")
    need(d.tokenizer in ("bpe", "char"), f"data.tokenizer must be 'bpe' or 'char', got {d.tokenizer!r}")
    need(d.vocab_size >= 256, f"data.vocab_size must be >= 256 (the bytes), got {d.vocab_size}")
    need(0.0 < d.val_fraction < 1.0, f"data.val_fraction must be in (0, 1), got {d.val_fraction}")
    at_least("data", "stride", 1)
    at_least("data", "num_workers", 0)
    for key in ("lr", "min_lr", "weight_decay", "beta1", "beta2", "grad_clip"):
        finite("optim", key)
    need(o.lr > 0, f"optim.lr must be > 0, got {o.lr}")
    need(
        0 <= o.min_lr <= o.lr,
        f"optim.min_lr must be in [0, optim.lr] (the cosine decays from optim.lr={o.lr} down to it), got {o.min_lr}",
    )
    at_least("optim", "warmup_steps", 0)
    at_least("optim", "weight_decay", 0)
    for key in ("beta1", "beta2"):
        v = getattr(o, key)
        need(0.0 <= v < 1.0, f"optim.{key} must be in [0, 1), got {v}")
    need(o.grad_clip >= 0, f"optim.grad_clip must be >= 0 (0: off), got {o.grad_clip}")
    for key in ("max_steps", "batch_size", "grad_accum", "eval_interval", "eval_batches", "log_interval"):
        at_least("train", key, 1)
    at_least("train", "keep_last", 1)
    at_least("train", "checkpoint_interval", 0)
    at_least("train", "early_stopping_patience", 0)
    finite("train", "early_stopping_min_delta")
    at_least("train", "early_stopping_min_delta", 0)
    need(0 <= t.seed < 2**63 - 1, f"train.seed must be in [0, 2**63 - 1), got {t.seed}")
    need(t.num_threads is None or t.num_threads >= 1, f"train.num_threads must be >= 1, got {t.num_threads}")
    need(
        t.precision in ("fp32", "bf16", "fp16"),
        f"train.precision must be fp32, bf16 or fp16, got {t.precision!r}",
    )
    # GradScaler skips a step by data inside a jitted step when the optimizer's updates take its found_inf; DiLoCo
    # would still count (and maybe take an outer step on) a skipped inner step, so it keeps eager steps
    need(
        t.precision != "fp16" or not t.jit or t.nproc == 1 or t.strategy != "diloco",
        "train.precision=fp16 with train.strategy=diloco needs train.jit=false: DiLoCo's step counting is not "
        "skipped by GradScaler's found_inf",
    )
    at_least("train", "nproc", 1)
    at_least("train", "inner_steps", 1)
    finite("train", "outer_lr")
    need(t.outer_lr > 0, f"train.outer_lr must be > 0, got {t.outer_lr}")
    need(0 <= t.outer_momentum < 1, f"train.outer_momentum must be in [0, 1), got {t.outer_momentum}")
    need(t.strategy in ("ddp", "diloco"), f"train.strategy must be ddp or diloco, got {t.strategy!r}")
    need(
        t.batch_size % t.nproc == 0,
        f"train.batch_size={t.batch_size} must be a multiple of train.nproc={t.nproc}: each rank computes "
        "an equal share of every batch",
    )
    at_least("train", "sample_tokens", 0)
    finite("train", "sample_temperature")
    need(t.sample_temperature > 0, f"train.sample_temperature must be > 0, got {t.sample_temperature}")
    need(
        t.sample_top_k is None or t.sample_top_k >= 1,
        f"train.sample_top_k must be >= 1, or null for all tokens, got {t.sample_top_k}",
    )
    need(r.dir != "", "run.dir must be a directory path, got ''")
    need(
        r.name is None or _plain_name(r.name),
        f"run.name must be a plain directory name (no '/', '\\', or a name of only dots), got {r.name!r}",
    )


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and "\0" not in name and name.strip(".") != ""


def read_text_file(path, what: str) -> str:
    """The UTF-8 text of `path`; a file that is missing, unreadable or not UTF-8 raises ConfigError naming it
    (`what` says which setting named the file)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {path} ({e.strerror or e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{what}: {path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); "
            "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def load_config(path: str | os.PathLike | None = None, overrides=()) -> Config:
    """The default config, updated by the YAML file at `path` (if any), then by `overrides` (``section.key=value``
    strings); raises ConfigError on unknown keys, wrong types and impossible values.

    >>> load_config(overrides=["train.max_steps=10"]).train.max_steps
    10
    """
    cfg = Config()
    _apply(cfg, yaml.safe_load(default_config_text()), "default.yaml")
    if path is not None:
        text = read_text_file(path, "config file")
        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError) as e:
            raise ConfigError(f"{path}: not valid YAML ({e})") from None
        _apply(cfg, data, str(path))
    for text in overrides:
        section, key, value = _parse_override(text)
        types_ = _section_types()
        if section not in types_:
            raise ConfigError(
                f"unknown section '{section}' in override {text!r}" + _did_you_mean(section, types_)
            )
        _set(cfg, section, key, value, f"override {text!r}")
    _check(cfg)
    return cfg


def config_from_dict(data: dict, source: str = "config") -> Config:
    """A Config from a resolved dict (as stored with a run or a checkpoint), checked like a file.

    >>> config_from_dict(load_config().to_dict()) == load_config()
    True
    """
    cfg = Config()
    _apply(cfg, data, source)
    _check(cfg)
    return cfg


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML (sections in order, keys in declaration order).

    >>> "n_layer: 4" in dump_config(load_config())
    True
    """
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=False)
