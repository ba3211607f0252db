"""Config: the packaged default, YAML files, dotted overrides and the errors for unknown keys and wrong types."""

import doctest

import pytest
import yaml

from plast.experiment import config as config_module
from plast.experiment.config import (
    Config,
    ConfigError,
    config_from_dict,
    default_config_text,
    dump_config,
    load_config,
)


def test_default_is_the_packaged_yaml_and_a_small_gpt():
    cfg = load_config()
    raw = yaml.safe_load(default_config_text())
    assert cfg.to_dict() == config_from_dict(raw).to_dict()
    assert (cfg.model.arch, cfg.model.n_layer, cfg.model.n_embd, cfg.model.n_head) == ("gpt", 4, 128, 4)
    assert (cfg.model.block_size, cfg.data.vocab_size, cfg.data.corpus) == (128, 1024, "python_docs")
    assert cfg == Config()  # the dataclass defaults are the YAML's, for code that builds a Config directly
    # every key of the dataclasses is spelled out in the YAML (so `plast train --show` documents them all)
    assert {s: set(v) for s, v in raw.items()} == {s: set(v) for s, v in Config().to_dict().items()}


def test_yaml_file_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  n_layer: 2\n  dropout: 0.1\noptim:\n  lr: 1e-3\ntrain:\n  num_threads: 2\n")
    cfg = load_config(path, ["model.n_layer=6", "optim.min_lr=5e-5", "run.name=exp1", "model.bias=true"])
    assert cfg.model.n_layer == 6 and cfg.model.dropout == 0.1
    assert cfg.optim.lr == 1e-3 and isinstance(cfg.optim.lr, float)  # "1e-3" is a str to PyYAML; accepted
    assert cfg.optim.min_lr == 5e-5
    assert cfg.run.name == "exp1" and cfg.model.bias is True and cfg.train.num_threads == 2
    assert cfg.model.n_embd == 128  # untouched keys keep the default


def test_override_values_are_yaml_scalars():
    cfg = load_config(
        overrides=["train.num_threads=null", "run.name=123", "optim.lr=1", "train.sample_top_k=~", "run.db="]
    )
    assert cfg.train.num_threads is None and cfg.train.sample_top_k is None
    assert cfg.run.name == "123" and cfg.optim.lr == 1.0 and cfg.run.db == ""


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.n_layers=2", "unknown key 'model.n_layers' (did you mean 'model.n_layer'?)"),
        ("modle.n_layer=2", "unknown section 'modle'"),
        ("model.n_layer=two", "model.n_layer must be int, got str 'two'"),
        ("model.n_layer=2.5", "model.n_layer must be int, got float 2.5"),
        ("model.bias=1", "model.bias must be bool, got int 1"),
        ("optim.lr=fast", "optim.lr must be float, got str 'fast'"),
        ("train.num_threads=x", "train.num_threads must be int or null"),
        ("model.n_layer", "is not of the form section.key=value"),
        ("model.n_layer.x=1", "the key must be section.key"),
        ("model.n_layer=[1, 2]", "the value must be a scalar"),
        ("model.n_embd=130", "must be a multiple of model.n_head"),
        ("train.batch_size=0", "train.batch_size must be >= 1"),
        ("data.tokenizer=wordpiece", "data.tokenizer must be 'bpe' or 'char'"),
        ("optim.weight_decay=-1.0", "optim.weight_decay must be >= 0, got -1.0"),
        ("optim.min_lr=5.0", "optim.min_lr must be in [0, optim.lr]"),
        ("optim.lr=.inf", "optim.lr must be a finite number, got inf"),
        ("optim.lr=.nan", "optim.lr must be a finite number, got nan"),
        ("optim.lr=0", "optim.lr must be > 0"),
        ("optim.beta2=1.0", "optim.beta2 must be in [0, 1)"),
        ("optim.grad_clip=-1", "optim.grad_clip must be >= 0"),
        ("optim.warmup_steps=-5", "optim.warmup_steps must be >= 0"),
        ("train.sample_temperature=0", "train.sample_temperature must be > 0, got 0.0"),
        ("train.sample_temperature=-1", "train.sample_temperature must be > 0"),
        ("train.sample_top_k=0", "train.sample_top_k must be >= 1, or null"),
        ("train.sample_tokens=-1", "train.sample_tokens must be >= 0"),
        ("train.eval_batches=0", "train.eval_batches must be >= 1"),
        ("train.keep_last=0", "train.keep_last must be >= 1"),
        ("train.seed=-1", "train.seed must be in [0, 2**63 - 1)"),
        ("train.early_stopping_min_delta=-0.5", "train.early_stopping_min_delta must be >= 0"),
        ("train.jit=yes please", "train.jit must be bool"),
        ("data.num_workers=-1", "data.num_workers must be >= 0"),
        ("data.val_fraction=1.5", "data.val_fraction must be in (0, 1)"),
        ("data.corpus=", "data.corpus must be 'python_docs' or the path"),
        ("run.name=../../elsewhere", "run.name must be a plain directory name"),
        ("run.dir=", "run.dir must be a directory path"),
        ("model.arch=evilmod:build", "model.arch 'evilmod:build' is not a registered architecture"),
        ("model.dropout=1.0", "model.dropout must be in [0, 1)"),
    ],
)
def test_override_errors_name_the_key(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert message in str(e.value)


def test_file_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  max_step: 10\n")
    with pytest.raises(
        ConfigError, match=r"bad.yaml: unknown key 'train.max_step' \(did you mean 'train.max_steps'"
    ):
        load_config(bad)
    bad.write_text("optim:\n  lr: [1, 2]\n")
    with pytest.raises(ConfigError, match="bad.yaml: optim.lr must be float, got list"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="a config is a mapping of sections"):
        load_config(bad)
    bad.write_text("model: 3\n")
    with pytest.raises(ConfigError, match="section 'model' must be a mapping"):
        load_config(bad)
    bad.write_text("model: {n_layer: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    assert issubclass(ConfigError, ValueError)


def test_non_utf8_or_unreadable_config_files_name_the_file(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("train:\n  sample_prompt: 'caf\xe9'\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.yaml is not UTF-8 text \(byte 0xe9 at offset 28\)"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read .*missing.yaml"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)  # a directory
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 20000 + "]" * 20000)
    with pytest.raises(ConfigError, match="deep.yaml"):
        load_config(deep)


EVIL = "open({marker!r}, 'w').write('ran')\ndef build(mcfg, vocab_size):\n    raise SystemExit('ran')\n"


def test_model_arch_never_imports_a_module(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    (tmp_path / "evilmod_cfg.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for arch in ("evilmod_cfg:build", "evilmod_cfg", "os:system"):
        with pytest.raises(ConfigError, match="is not a registered architecture"):
            load_config(overrides=[f"model.arch={arch}"])
        with pytest.raises(ConfigError, match="register_arch"):
            config_from_dict({"model": {"arch": arch}})
    assert not marker.exists()


def test_register_arch():
    from plast.experiment import register_arch, registered_archs

    def build(mcfg, vocab_size):
        return None

    register_arch("test-arch.v1", build)
    assert "test-arch.v1" in registered_archs() and "gpt" in registered_archs()
    assert load_config(overrides=["model.arch=test-arch.v1"]).model.arch == "test-arch.v1"
    register_arch("test-arch.v1", build)  # the same builder again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_arch("test-arch.v1", lambda m, v: None)
    with pytest.raises(ValueError, match="already registered"):
        register_arch("gpt", build)
    with pytest.raises(ValueError, match="the name must be"):
        register_arch("../x", build)
    with pytest.raises(TypeError, match="must be callable"):
        register_arch("x", "module:function")


def test_dump_round_trips():
    cfg = load_config(overrides=["model.n_layer=3", "run.name=x", "train.num_threads=2"])
    assert config_from_dict(yaml.safe_load(dump_config(cfg))) == cfg
    text = dump_config(cfg)
    assert text.index("model:") < text.index("data:") < text.index("optim:") < text.index("train:")


def test_docstring_examples_run():
    result = doctest.testmod(config_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("module", ["archs", "runlock"])
def test_docstring_examples_of_archs_and_runlock_run(module):
    import importlib

    result = doctest.testmod(importlib.import_module(f"plast.experiment.{module}"))
    assert result.attempted > 0 and result.failed == 0


def test_the_default_run_passes_its_own_checks(tmp_path):
    """`plast train` with no arguments (the README's main job): the shipped defaults, on the default corpus and
    tokenizer, build a Trainer without a ConfigError (train.eval_batches once asked for more batches than the
    default validation split holds)."""
    from plast.experiment.config import load_config
    from plast.experiment.trainer import Trainer

    cfg = load_config(overrides=[f"run.dir={tmp_path}", "run.plot=false"])
    trainer = Trainer(cfg, quiet=True, stop_at_step=1)
    trainer.fit()  # sets up (data, checks), trains one step, stops
    assert len(trainer.val_batches) == cfg.train.eval_batches
