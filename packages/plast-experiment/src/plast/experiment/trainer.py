"""The training loop behind ``plast train``: data, model, a ``@plast.jit`` step, evaluation, checkpoints, tracking.

One optimizer step is one call of a jitted function that runs ``grad_accum`` forward/backward passes,
clips the gradient norm and updates the parameters; the learning rate (linear warm-up, then cosine decay to
``min_lr``) is a runtime input of that plan, so it is traced once. Evaluation runs every ``eval_interval`` steps
under ``no_grad`` with the model in eval mode, on a fixed set of validation windows (it draws no random
numbers, so it never changes the training trajectory). Checkpoints hold everything the next step depends on,
so ``--resume`` continues with exactly the losses an uninterrupted run would have had.

Ctrl-C (SIGINT) finishes the step in progress, saves a checkpoint and returns with status "interrupted"; a
second Ctrl-C stops at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import plast
from plast.experiment.archs import build_arch
from plast.experiment.checkpoint import Checkpointer, load_checkpoint
from plast.experiment.config import (
    Config,
    ConfigError,
    config_from_dict,
    dump_config,
    load_config,
    read_text_file,
)
from plast.experiment.runlock import RunLock
from plast.experiment.tracker import Tracker

__all__ = ["TrainResult", "Trainer", "WarmupCosine", "build_model", "prepare_data", "sample_text"]

TOKENIZER_FILE = "tokenizer.txt"
CONFIG_FILE = "config.yaml"
RUN_FILE = "run.json"


# ---- pieces ---------------------------------------------------------------------------------------------------


class WarmupCosine:
    """The learning-rate factor at a step: linear warm-up from ``1/warmup`` to 1 over `warmup` steps, then a
    cosine from 1 down to ``min_ratio`` at `total` steps (and ``min_ratio`` after). A callable object, so
    ``LambdaLR.state_dict()`` saves it.

    >>> f = WarmupCosine(warmup=10, total=110, min_ratio=0.1)
    >>> round(f(0), 3), f(9), f(10), round(f(60), 3), round(f(110), 3)
    (0.1, 1.0, 1.0, 0.55, 0.1)
    """

    def __init__(self, warmup: int, total: int, min_ratio: float):
        self.warmup = int(warmup)
        self.total = int(total)
        self.min_ratio = float(min_ratio)

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if step >= self.total or self.total <= self.warmup:
            return self.min_ratio
        progress = (step - self.warmup) / (self.total - self.warmup)
        return self.min_ratio + 0.5 * (1.0 + math.cos(math.pi * progress)) * (1.0 - self.min_ratio)


def build_model(mcfg, vocab_size: int):
    """The model of a config: the architecture registered under ``mcfg.arch`` (``gpt``: ``plast.nn.GPT``; see
    ``plast.experiment.register_arch``), built for `vocab_size` tokens. Nothing is imported by name."""
    return build_arch(mcfg, vocab_size)


def _make_optimizer(model, ocfg):
    betas = (ocfg.beta1, ocfg.beta2)
    if hasattr(model, "configure_optimizers"):
        return model.configure_optimizers(weight_decay=ocfg.weight_decay, learning_rate=ocfg.lr, betas=betas)
    return plast.optim.AdamW(model.parameters(), lr=ocfg.lr, betas=betas, weight_decay=ocfg.weight_decay)


@dataclass
class Data:
    tokenizer: object
    train_ids: np.ndarray
    val_ids: np.ndarray
    text_bytes: int


def _load_text(corpus: str) -> str:
    if corpus == "python_docs":
        return plast.data.python_docs()
    p = Path(corpus)
    if not p.is_file():
        raise FileNotFoundError(f"data.corpus: {corpus!r} is neither 'python_docs' nor a text file")
    return read_text_file(p, "data.corpus")


def _train_tokenizer(dcfg, text: str):
    from plast.data.tokenizers import BPETokenizer, CharTokenizer

    if dcfg.tokenizer == "char":
        return CharTokenizer().train(text)
    return BPETokenizer().train(text, vocab_size=dcfg.vocab_size)


def prepare_data(dcfg, cache_dir: str | os.PathLike | None = None, tokenizer_path=None, log=print) -> Data:
    """Read the corpus, train (or load) the tokenizer, encode, and split by position. With `cache_dir`, the
    tokenizer and the token ids are kept there, keyed by a hash of the text and the tokenizer settings."""
    from plast.data import train_val_split
    from plast.data.tokenizers import load as load_tokenizer

    text = _load_text(dcfg.corpus)
    tok = ids = None
    if tokenizer_path is not None:
        tok = load_tokenizer(tokenizer_path)
    key = hashlib.sha256(
        f"{dcfg.tokenizer}|{dcfg.vocab_size}|".encode() + text.encode("utf-8", "surrogatepass")
    ).hexdigest()[:20]
    cache = Path(cache_dir) if (cache_dir is not None and dcfg.cache) else None
    if cache is not None and tok is None:
        tpath, ipath = cache / f"{key}.tokenizer.txt", cache / f"{key}.ids.npy"
        if tpath.exists() and ipath.exists():
            try:
                tok, ids = load_tokenizer(tpath), np.load(ipath)
            except (ValueError, OSError):
                tok = ids = None
    if tok is None:
        t0 = time.perf_counter()
        tok = _train_tokenizer(dcfg, text)
        log(
            f"trained a {dcfg.tokenizer} tokenizer (vocab {tok.vocab_size}) in {time.perf_counter() - t0:.1f}s"
        )
    if ids is None:
        t0 = time.perf_counter()
        ids = np.asarray(tok.encode(text), dtype=np.int32)
        log(
            f"encoded {len(text.encode()) / 1e3:.0f} KB into {len(ids):,} tokens in {time.perf_counter() - t0:.1f}s"
        )
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = cache / f".{key}.{os.getpid()}.ids.npy"
            np.save(tmp, ids)
            os.replace(tmp, cache / f"{key}.ids.npy")
            tok.save(cache / f"{key}.tokenizer.txt")
    train, val = train_val_split(ids, dcfg.val_fraction)
    return Data(tok, train, val, len(text.encode("utf-8", "surrogatepass")))


def sample_text(
    model, tokenizer, prompt: str, max_new_tokens: int, temperature: float = 1.0, top_k=None
) -> str:
    """`prompt` continued by `max_new_tokens` tokens from `model.generate`, decoded (prompt included)."""
    ids = tokenizer.encode(prompt) if prompt else []
    if not ids:
        ids = tokenizer.encode("\n") or [0]
    was_training = model.training
    model.eval()
    try:
        with plast.no_grad():
            idx = plast.tensor(np.asarray([ids], dtype=np.int64))
            out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k)
        text = tokenizer.decode(out[0].tolist(), errors="replace")
    finally:
        model.train(was_training)
    return text if prompt else text[1:] if text.startswith("\n") else text


def _to_builtin(obj):
    """numpy scalars and arrays inside a state dict become plain Python values."""
    if isinstance(obj, dict):
        return {k: _to_builtin(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_builtin(v) for v in obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


# ---- several ranks --------------------------------------------------------------------------------------------


class _Ranks:
    """The ranks of a run with ``train.nproc > 1`` (started by ``plast train --nproc N``). Every rank draws the
    same batches (one generator, one loader state, so a run resumes with any number of ranks) and computes its
    own contiguous share of each; rank 0 alone writes the run directory, the run database and the checkpoints.
    Decisions that end the loop (a Ctrl-C, a non-finite loss, early stopping) are taken on values every rank
    agrees on, so no rank leaves the others waiting in a collective."""

    def __init__(self, nproc: int):
        import plast.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("mpi")
        self.dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        if self.size != nproc:
            raise ConfigError(
                f"train.nproc={nproc}, but {self.size} ranks were started; start them with plast train --nproc N"
            )

    def share(self, rows: int) -> slice:
        n = rows // self.size
        return slice(self.rank * n, (self.rank + 1) * n)

    def mean(self, *values: float) -> list[float]:
        """The mean over the ranks of each value (one allreduce of float64 numbers)."""
        t = plast.tensor(np.asarray(values, dtype=np.float64))
        self.dist.all_reduce(t, op=self.dist.ReduceOp.AVG)
        return t.tolist()

    def text_from_main(self, text: str | None) -> str:
        """Rank 0's `text` on every rank."""
        n = plast.tensor([len(text.encode()) if self.rank == 0 else 0], dtype=plast.int64)
        self.dist.broadcast(n, src=0)
        raw = (
            np.frombuffer(text.encode(), dtype=np.uint8)
            if self.rank == 0
            else np.zeros(int(n.item()), np.uint8)
        )
        buf = plast.tensor(raw.astype(np.int32))
        self.dist.broadcast(buf, src=0)
        return bytes(np.asarray(buf.numpy(), dtype=np.uint8)).decode()


class _NoTracker:
    """The run database of a rank other than 0: it records nothing (rank 0 records the run)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


# ---- the trainer ----------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    run_id: str
    run_dir: Path
    status: str  # "finished", "stopped early", "interrupted"
    step: int
    val_loss: float | None
    best_val_loss: float | None
    seconds: float
    checkpoint: Path | None
    plot: Path | None = None


class _Interrupt:
    """Turns the first SIGINT into a flag the loop checks between steps; a second one raises at once."""

    def __init__(self):
        self.flag = False
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


class Trainer:
    """Trains `cfg` in a new run directory, or continues the run in `resume` (a run directory) from its
    newest good checkpoint.

    `stop_at_step` makes the loop behave as if Ctrl-C was pressed after that step (tests use it); `quiet`
    silences the progress bar and log lines.

    >>> cfg = load_config(overrides=["train.max_steps=100"])
    >>> Trainer(cfg).cfg.train.max_steps
    100
    """

    def __init__(
        self,
        cfg: Config | None = None,
        *,
        resume: str | os.PathLike | None = None,
        quiet: bool = False,
        stop_at_step: int | None = None,
    ):
        self.quiet = quiet
        self.stop_at_step = stop_at_step
        self.resume_dir = None if resume is None else Path(resume)
        if self.resume_dir is not None:
            info = self.resume_dir / RUN_FILE
            if not info.exists():
                raise FileNotFoundError(f"{self.resume_dir} is not a plast run directory (no {RUN_FILE})")
            try:
                self.run_info = json.loads(read_text_file(info, "--resume"))
                if not isinstance(self.run_info, dict) or not {"run_id", "db"} <= set(self.run_info):
                    raise ValueError("not a mapping with run_id and db")
            except (ValueError, RecursionError) as e:
                if isinstance(e, ConfigError):
                    raise
                raise ConfigError(f"{info} is damaged ({e}); it names the run's id and database") from None
            if cfg is None:  # the run's own config (a caller may pass it with overrides applied)
                cfg = load_config(self.resume_dir / CONFIG_FILE)
        if cfg is None:
            raise ValueError("Trainer needs a config, or resume= a run directory")
        self.cfg = cfg
        self._bar = None

    # ---- output ----
    def _say(self, msg: str) -> None:
        if self.quiet:
            return
        if self._bar is not None and not self._bar.disable:
            self._bar.write(msg)
        else:
            print(msg, flush=True)

    # ---- setup ----
    def _setup_run(self):
        if self.ranks is None:
            return self._setup_run_main()
        if self.ranks.rank == 0:
            self._setup_run_main()
            self.ranks.text_from_main(json.dumps([str(self.run_dir), self.run_id]))
            return
        run_dir, self.run_id = json.loads(self.ranks.text_from_main(None))
        self.run_dir, self.tracker = Path(run_dir), _NoTracker()

    def _setup_run_main(self):
        cfg = self.cfg
        if self.resume_dir is not None:
            self.run_dir = self.resume_dir
            self._lock = RunLock(self.run_dir).acquire()  # before anything touches the run or its metrics
            self.db_path = Path(self.run_info["db"])
            self.tracker = Tracker(self.db_path)
            self.run_id = self.run_info["run_id"]
            text, path = dump_config(cfg), self.run_dir / CONFIG_FILE
            if path.read_text(encoding="utf-8") != text:  # resumed with overrides: store what now runs
                path.write_text(text, encoding="utf-8")
                self.tracker.log_params(self.run_id, cfg.to_dict())
            return
        root = Path(cfg.run.dir)
        self.db_path = Path(cfg.run.db) if cfg.run.db else root / "runs.db"
        self.tracker = Tracker(self.db_path)
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()
        name = cfg.run.name or run_id
        run_dir = root / name
        n = 2
        while run_dir.exists():
            run_dir = root / f"{name}-{n}"
            n += 1
        run_dir.mkdir(parents=True)
        self.run_dir = run_dir
        self._lock = RunLock(run_dir).acquire()
        self.run_id = self.tracker.start_run(
            name, params=cfg.to_dict(), config=cfg.to_dict(), dir=str(run_dir.resolve()), run_id=run_id
        )
        (run_dir / CONFIG_FILE).write_text(dump_config(cfg), encoding="utf-8")
        self.run_info = {"run_id": self.run_id, "name": name, "db": str(self.db_path.resolve())}
        (run_dir / RUN_FILE).write_text(json.dumps(self.run_info, indent=1), encoding="utf-8")

    def _setup(self):
        cfg = self.cfg
        t = cfg.train
        if t.num_threads is not None:
            plast.set_num_threads(t.num_threads)
        plast.manual_seed(t.seed)
        tok_path = self.run_dir / TOKENIZER_FILE
        if self.ranks is not None and self.ranks.rank != 0:
            self.ranks.dist.barrier()  # rank 0 trains the tokenizer and writes it to the run directory first
        self.data = prepare_data(
            cfg.data,
            cache_dir=Path(cfg.run.dir) / "cache",
            tokenizer_path=tok_path if tok_path.exists() else None,
            log=self._say,
        )
        if self.is_main and not tok_path.exists():
            self.data.tokenizer.save(tok_path)
            self.tracker.log_artifact(self.run_id, "tokenizer", tok_path, "tokenizer")
        if self.ranks is not None and self.ranks.rank == 0:
            self.ranks.dist.barrier()
        self.vocab_size = self.data.tokenizer.vocab_size
        if t.sample_tokens > 0:  # checked now, not after training: the sample is the run's last step
            try:
                self.data.tokenizer.encode(t.sample_prompt)
            except ValueError as e:
                raise ConfigError(
                    f"train.sample_prompt={t.sample_prompt!r} cannot be encoded by this run's tokenizer: {e}. "
                    "Give a prompt made of the corpus's characters, or train.sample_tokens=0 for no sample"
                ) from e
        self.model = build_model(cfg.model, self.vocab_size)
        self.optimizer = inner = _make_optimizer(self.model, cfg.optim)
        self.step_model = self.model  # what a training step calls: the model, or its DDP wrapper
        if self.ranks is not None and t.strategy == "ddp":
            self.step_model = plast.nn.parallel.DistributedDataParallel(self.model)
        elif self.ranks is not None:
            self.optimizer = plast.optim.DiLoCo(
                [p for g in self.optimizer.param_groups for p in g["params"]],
                self.optimizer,
                inner_steps=t.inner_steps,
                outer_lr=t.outer_lr,
                outer_momentum=t.outer_momentum,
            )
        # loss scaling for fp16 only; disabled, it passes losses and steps through
        self.scaler = plast.amp.GradScaler("cpu", enabled=cfg.train.precision == "fp16")
        self.scheduler = plast.optim.lr_scheduler.LambdaLR(  # DiLoCo: the inner optimizer's learning rate
            inner, WarmupCosine(cfg.optim.warmup_steps, t.max_steps, cfg.optim.min_lr / cfg.optim.lr)
        )
        # data: shuffled training windows from a generator of their own; a fixed set of validation windows
        from plast.data import DataLoader, TokenWindows

        block = cfg.model.block_size
        self.train_ds = TokenWindows(self.data.train_ids, block, stride=cfg.data.stride)
        self.data_gen = plast.Generator().manual_seed(t.seed + 1)
        rows = t.batch_size * t.grad_accum
        if len(self.train_ds) < rows:
            raise ValueError(
                f"the training split has {len(self.train_ds)} windows of {block} tokens, fewer than one step "
                f"needs ({rows} = train.batch_size x train.grad_accum); use more text or smaller sizes"
            )
        self.loader = DataLoader(
            self.train_ds,
            batch_size=rows,
            shuffle=True,
            drop_last=True,
            generator=self.data_gen,
            num_workers=cfg.data.num_workers,
            persistent_workers=cfg.data.num_workers > 0,
        )
        val_ds = TokenWindows(self.data.val_ids, block) if len(self.data.val_ids) > block else None
        self.val_batches = []
        if val_ds is not None:
            most = -(-len(val_ds) // t.batch_size)
            if t.eval_batches > most:
                raise ConfigError(
                    f"train.eval_batches={t.eval_batches} is more than the validation split holds: "
                    f"{len(val_ds)} windows of {block} tokens make at most {most} batches of "
                    f"train.batch_size={t.batch_size}; use train.eval_batches <= {most} or more data.val_fraction"
                )
            n = min(len(val_ds), t.eval_batches * t.batch_size)
            idx = np.unique(np.linspace(0, len(val_ds) - 1, n).round().astype(np.int64))
            for s in range(0, len(idx), t.batch_size):
                x, y = val_ds.batch(idx[s : s + t.batch_size])
                self.val_batches.append((plast.tensor(x), plast.tensor(y)))
        self.checkpointer = Checkpointer(self.run_dir / "checkpoints", keep_last=t.keep_last)
        self._build_steps()

    def _build_steps(self):
        model, opt, cfg = self.step_model, self.optimizer, self.cfg
        accum, bsz, clip = cfg.train.grad_accum, cfg.train.batch_size, cfg.optim.grad_clip
        ddp = model is not self.model
        if self.ranks is not None:
            bsz //= self.ranks.size  # this rank's rows of each micro-batch
        from plast.nn.utils import clip_grad_norm_

        params = [p for p in model.parameters() if p.requires_grad]
        precision = cfg.train.precision
        low = {"bf16": plast.bfloat16, "fp16": plast.float16}.get(precision)
        scaler = self.scaler

        def region():
            return plast.autocast("cpu", dtype=low or plast.bfloat16, enabled=low is not None)

        def train_step(x, y):
            opt.zero_grad(set_to_none=True)
            total = None
            for i in range(accum):
                # DDP averages the gradients once, after the last micro-batch's backward
                with model.no_sync() if ddp and i < accum - 1 else contextlib.nullcontext():
                    with region():
                        _, loss = model(x[i * bsz : (i + 1) * bsz], y[i * bsz : (i + 1) * bsz])
                    scaler.scale(loss / accum).backward()
                total = loss.detach() if total is None else total + loss.detach()
            scaler.unscale_(opt)  # clip the true gradients
            norm = clip_grad_norm_(params, clip) if clip > 0 else None
            scaler.step(opt)
            scaler.update()
            return total / accum, norm

        def eval_step(x, y):
            with region():
                _, loss = self.model(x, y)
            return loss

        # with several ranks too: DDP's allreduces and DiLoCo's outer step are steps of jit plans
        # (plast.distributed's traced collectives; DiLoCo's every-H-th call has a plan of its own)
        if cfg.train.jit:
            train_step, eval_step = plast.jit(train_step), plast.jit(eval_step)
        self._train_step, self._eval_step = train_step, eval_step

    # ---- state ----
    def _train_state(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": _to_builtin(self.scheduler.state_dict()),
            "scaler": _to_builtin(self.scaler.state_dict()),
            "rng": {"global": plast.get_rng_state(), "data": self.data_gen.get_state()},
            "loader": _to_builtin(self.loader.state_dict()),
            "trainer": {
                "step": self.step,
                "best_val": self.best_val,
                "bad_evals": self.bad_evals,
                "tokens": self.tokens,
                "seconds": self.seconds,
            },
        }

    def _restore(self, ck) -> None:
        self.model.load_state_dict(ck.load_model_state())
        state = ck.load_state()
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:
            if isinstance(group.get("betas"), list):
                group["betas"] = tuple(group["betas"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler.is_enabled() and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        plast.set_rng_state(state["rng"]["global"])
        self.data_gen.set_state(state["rng"]["data"])
        self.loader.load_state_dict(state["loader"])
        tr = state["trainer"]
        self.step, self.best_val, self.bad_evals = int(tr["step"]), tr["best_val"], int(tr["bad_evals"])
        self.tokens, self.seconds = int(tr["tokens"]), float(tr["seconds"])

    def save_checkpoint(self, metrics: dict | None = None):
        if not self.is_main:  # rank 0 writes the checkpoints (DDP: every rank holds the same state)
            self._last_ckpt_step = self.step
            return None
        tok_path = self.run_dir / TOKENIZER_FILE
        ck = self.checkpointer.save(
            self.step,
            self.model.state_dict(),
            self._train_state(),
            metrics=metrics,
            files={TOKENIZER_FILE: tok_path, CONFIG_FILE: (self.run_dir / CONFIG_FILE)},
        )
        self._last_ckpt_step = self.step
        self.last_checkpoint = ck.path
        return ck

    def _comm_bytes(self) -> int:
        """The gradient bytes this rank has sent so far: DDP's allreduce payload (every parameter's gradient, every
        step), or DiLoCo's pseudo-gradients (every inner_steps steps). Steps before a resume are not counted."""
        if isinstance(self.optimizer, plast.optim.DiLoCo):
            return self.optimizer.bytes_sent
        per_step = sum(p.numel() * p.element_size() for p in self.model.parameters() if p.requires_grad)
        return per_step * (self.step - self._first_step)

    def _seed_rank(self) -> None:
        """Ranks after 0 draw their own random numbers (dropout masks) once the model is built: the same stream
        as rank 0's would give every rank's rows of a batch the same masks. NOTE: a checkpoint keeps rank 0's
        stream, so a resumed run re-seeds the others here, from the step: with dropout, a resumed multi-rank run
        is not bit-identical to an uninterrupted one (rank 0's share is)."""
        if self.ranks is not None and self.ranks.rank > 0:
            plast.manual_seed((self.cfg.train.seed + 1_000_003 * self.ranks.rank + self.step) % 2**63)

    # ---- evaluation ----
    def evaluate(self) -> float | None:
        if not self.val_batches:
            return None
        self.model.eval()
        try:
            with plast.no_grad():
                losses = [self._eval_step(x, y).item() for x, y in self.val_batches]
        finally:
            self.model.train()
        rows = [x.shape[0] for x, _ in self.val_batches]  # the last batch may be smaller
        val = float(np.average(losses, weights=rows))
        if self.ranks is not None:  # DDP: one model, the same loss; DiLoCo: the replicas' mean
            (val,) = self.ranks.mean(val)
        return val

    def _batches(self):
        while True:
            yield from self.loader

    # ---- the loop ----
    def fit(self) -> TrainResult:
        """Train to ``train.max_steps`` (or early stopping, or Ctrl-C). The run directory is locked while this
        runs: another process training it at the same time gets RunLockedError (plast.experiment.runlock)."""
        self._lock = None
        self.ranks = _Ranks(self.cfg.train.nproc) if self.cfg.train.nproc > 1 else None
        self.is_main = self.ranks is None or self.ranks.rank == 0
        if not self.is_main:
            self.quiet = True
        try:
            return self._fit()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _fit(self) -> TrainResult:
        self._bar = None
        self._setup_run()
        t0 = time.perf_counter()
        cfg = self.cfg
        self.step, self.best_val, self.bad_evals, self.tokens, self.seconds = 0, None, 0, 0, 0.0
        self.last_checkpoint, self._last_ckpt_step = None, -1
        status = "failed"
        try:
            self._setup()
            if self.resume_dir is not None:
                ck = self.checkpointer.latest()
                if ck is None:
                    raise FileNotFoundError(f"{self.run_dir} has no usable checkpoint to resume from")
                self._restore(ck)
                self._seed_rank()
                self._last_ckpt_step, self.last_checkpoint = self.step, ck.path
                self.tracker.resume_run(self.run_id, after_step=self.step)
                self._say(f"resuming run {self.run_id} at step {self.step} from {ck.path}")
            else:
                self._seed_rank()
                n_params = sum(p.numel() for p in self.model.parameters())
                self.tracker.log_params(self.run_id, {"n_params": n_params, "vocab_size": self.vocab_size})
                self._say(
                    f"run {self.run_id}: {n_params / 1e6:.2f}M parameters, vocab {self.vocab_size}, "
                    f"{len(self.data.train_ids):,} training and {len(self.data.val_ids):,} validation tokens -> "
                    f"{self.run_dir}"
                )
            if cfg.run.tensorboard and not self.tracker.enable_tensorboard(self.run_id, self.run_dir / "tb"):
                self._say(
                    "run.tensorboard: tensorboardX is not installed; metrics go to the run database only"
                )
            status = self._loop(t0)
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            self.tracker.finish(self.run_id, status)
        if not self.is_main:
            return TrainResult(
                run_id=self.run_id,
                run_dir=self.run_dir,
                status=status,
                step=self.step,
                val_loss=None,
                best_val_loss=self.best_val,
                seconds=time.perf_counter() - t0,
                checkpoint=None,
            )
        plot = None
        if cfg.run.plot:
            from plast.experiment.plots import plot_runs

            plot = self.run_dir / "loss.png"
            plot_runs(self.tracker, [self.run_id], plot, names=("train_loss", "val_loss"))
            self.tracker.log_artifact(self.run_id, "loss curve", plot, "plot")
        self.tracker.export_csv(self.run_dir / "metrics.csv", self.run_id)
        val = self.tracker.last(self.run_id).get("val_loss")
        result = TrainResult(
            run_id=self.run_id,
            run_dir=self.run_dir,
            status=status,
            step=self.step,
            val_loss=None if val is None else val[1],
            best_val_loss=self.best_val,
            seconds=time.perf_counter() - t0,
            checkpoint=self.last_checkpoint,
            plot=plot,
        )
        self.tracker.close()
        return result

    def _loop(self, t0: float) -> str:
        from tqdm.auto import tqdm

        cfg, t = self.cfg, self.cfg.train
        tokens_per_step = t.batch_size * t.grad_accum * cfg.model.block_size
        show_bar = not self.quiet and sys.stderr.isatty()
        self._bar = tqdm(
            total=t.max_steps,
            initial=self.step,
            unit="step",
            dynamic_ncols=True,
            disable=not show_bar,
            leave=True,
        )
        run, tracker = self.run_id, self.tracker
        if self.step == 0:
            val = self.evaluate()
            if val is not None:
                tracker.log(run, 0, "val_loss", val)
                self._say(f"step {0:>6}/{t.max_steps} | val loss {val:.4f}")
        status = "finished"
        batches = self._batches()
        loop_t0, first_step = time.perf_counter(), self.step
        self._first_step = first_step
        window_t, window_tokens = time.perf_counter(), 0
        loss_avg = None
        with _Interrupt() as interrupt:
            while self.step < t.max_steps:
                stop = interrupt.flag or (self.stop_at_step is not None and self.step >= self.stop_at_step)
                if self.ranks is not None:  # a stop any rank was asked for (Ctrl-C reaches each rank)
                    stop = self.ranks.mean(float(stop))[0] > 0
                if stop:
                    status = "interrupted"
                    break
                step_t = time.perf_counter()
                x, y = next(batches)
                if self.ranks is not None:
                    share = self.ranks.share(x.shape[0])
                    x, y = x[share], y[share]
                lr = self.optimizer.param_groups[0]["lr"]
                loss, norm = self._train_step(x, y)
                self.scheduler.step()
                self.step += 1
                loss_v = loss.item()
                if self.ranks is not None:  # the whole batch's loss: the ranks' shares are equal
                    (loss_v,) = self.ranks.mean(loss_v)
                norm_v = None if norm is None else norm.item()
                plast.reset_transient_arenas()
                if not math.isfinite(loss_v):
                    raise FloatingPointError(
                        f"the training loss became {loss_v} at step {self.step}; lower optim.lr or raise "
                        "optim.warmup_steps (the last good checkpoint is kept)"
                    )
                self.tokens += tokens_per_step
                self.seconds += time.perf_counter() - step_t
                window_tokens += tokens_per_step
                loss_avg = loss_v if loss_avg is None else 0.9 * loss_avg + 0.1 * loss_v
                tracker.log(run, self.step, "train_loss", loss_v)
                if self.step % t.log_interval == 0 or self.step == t.max_steps:
                    now = time.perf_counter()
                    tps = window_tokens / max(now - window_t, 1e-9)
                    window_t, window_tokens = now, 0
                    metrics = {"lr": lr, "tokens_per_s": tps}
                    if self.ranks is not None:
                        metrics["comm_bytes"] = self._comm_bytes()
                    if norm_v is not None:
                        metrics["grad_norm"] = norm_v
                    tracker.log_many(run, self.step, metrics)
                    self._bar.set_postfix_str(f"loss {loss_avg:.3f} | {tps / 1e3:.1f}k tok/s", refresh=False)
                self._bar.update(1)
                last = self.step == t.max_steps
                if self.step % t.eval_interval == 0 or last:
                    val = self.evaluate()
                    metrics = {}
                    if val is not None:
                        tracker.log(run, self.step, "val_loss", val)
                        metrics["val_loss"] = val
                        # NOTE: a NaN validation loss is never an improvement (nor the best)
                        improved = math.isfinite(val) and (
                            self.best_val is None or val < self.best_val - t.early_stopping_min_delta
                        )
                        if improved:
                            self.best_val, self.bad_evals = val, 0
                        else:
                            self.bad_evals += 1
                    tracker.flush()
                    now = time.perf_counter()
                    eta = (now - loop_t0) / (self.step - first_step) * (t.max_steps - self.step)
                    self._say(
                        f"step {self.step:>6}/{t.max_steps} | train loss {loss_avg:.4f} | "
                        + (f"val loss {val:.4f} | " if val is not None else "")
                        + f"lr {lr:.2e} | {self.tokens / max(self.seconds, 1e-9) / 1e3:.1f}k tok/s | "
                        + f"{now - t0:.0f}s, eta {eta:.0f}s"
                    )
                    if t.checkpoint_interval == 0 or last:
                        self.save_checkpoint(metrics)
                    if t.early_stopping_patience and self.bad_evals >= t.early_stopping_patience:
                        self._say(
                            f"early stopping: no improvement of val loss in {self.bad_evals} evaluations "
                            f"(best {self.best_val:.4f})"
                        )
                        status = "stopped early"
                        break
                if t.checkpoint_interval and self.step % t.checkpoint_interval == 0:
                    if self._last_ckpt_step != self.step:
                        self.save_checkpoint()
            if status == "interrupted":
                self._say(f"interrupted at step {self.step}: saving a checkpoint")
        if self._last_ckpt_step != self.step:
            self.save_checkpoint()
        if status == "interrupted":
            self._say(f"saved {self.last_checkpoint}; continue with: plast train --resume {self.run_dir}")
        return status


def load_for_sampling(path: str | os.PathLike):
    """(model, tokenizer, config) from a run directory or a checkpoint directory."""
    import yaml

    from plast.data.tokenizers import load as load_tokenizer

    ck = load_checkpoint(path)
    cfg_path = ck.file(CONFIG_FILE)
    try:
        data = yaml.safe_load(read_text_file(cfg_path, "checkpoint config"))
    except (yaml.YAMLError, RecursionError) as e:
        raise ConfigError(f"{cfg_path}: not valid YAML ({e})") from None
    # NOTE: config_from_dict accepts only registered architectures: a checkpoint never makes us import code
    cfg = config_from_dict(data, str(cfg_path))
    tok = load_tokenizer(ck.file(TOKENIZER_FILE))
    model = build_model(cfg.model, tok.vocab_size)
    model.load_state_dict(ck.load_model_state())
    model.eval()
    return model, tok, cfg, ck
