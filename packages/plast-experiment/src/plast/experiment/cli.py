"""The ``plast`` command.

    plast train [CONFIG.yaml] [section.key=value ...] [--show] [--quiet] [--resume RUN_DIR]
                [--nproc N [--strategy ddp|diloco] [--inner-steps H] [--hostfile FILE]]
    plast sample RUN_DIR|CHECKPOINT_DIR --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K]
    plast runs [--db PATH]
    plast plot RUN [RUN ...] [--out PNG] [--metric NAME ...]
    plast export RUN [--out CSV]
    plast show-config
    plast embed SENTENCE ... [--file FILE] [--model DIR] [--batch-size N] [--similarity]
    plast search --corpus FILE QUERY [--top-k K] [--model DIR]

``plast train`` with no arguments trains the default config (``plast train --show`` prints it): a small GPT on
the text of Python's own documentation, in a few minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main"]

DEFAULT_DB = os.path.join("plast-runs", "runs.db")


def _split_train_args(items: list[str]) -> tuple[str | None, list[str]]:
    """The optional config file (the first item without '=') and the overrides."""
    path, overrides = None, []
    for i, item in enumerate(items):
        if "=" not in item and i == 0:
            path = item
        elif "=" not in item:
            raise SystemExit(
                f"plast train: {item!r} is not an override (section.key=value); only the first argument may be a config file"
            )
        else:
            overrides.append(item)
    return path, overrides


def _cmd_train(args) -> int:
    from plast.experiment.config import ConfigError, dump_config, load_config
    from plast.experiment.trainer import CONFIG_FILE, Trainer, sample_text

    path, overrides = _split_train_args(args.items)
    for flag, key in (("nproc", "nproc"), ("strategy", "strategy"), ("inner_steps", "inner_steps")):
        if getattr(args, flag) is not None:
            overrides.append(f"train.{key}={getattr(args, flag)}")
    try:
        if args.resume:
            run_dir = Path(args.resume)
            if path is not None:
                raise ConfigError("plast train --resume takes the run's own config; give overrides only")
            if not (run_dir / CONFIG_FILE).exists():
                print(f"plast train: {run_dir} is not a run directory (no {CONFIG_FILE})", file=sys.stderr)
                return 2
            cfg = load_config(run_dir / CONFIG_FILE, overrides)
        else:
            cfg = load_config(path, overrides)
    except (ConfigError, FileNotFoundError) as e:
        print(f"plast train: {e}", file=sys.stderr)
        return 2
    if args.show:
        print(dump_config(cfg), end="")
        return 0
    if cfg.train.nproc > 1 and RANK_ENV not in os.environ:
        return _launch_ranks(args, cfg.train.nproc)
    import plast
    from plast.errors import CheckpointError
    from plast.experiment.runlock import RunLockedError
    from plast.experiment.tracker import DatabaseLockedError

    try:
        trainer = Trainer(cfg, resume=args.resume, quiet=args.quiet)
        result = trainer.fit()
    except (ConfigError, RunLockedError, DatabaseLockedError, CheckpointError, OSError) as e:
        print(f"plast train: {e}", file=sys.stderr)
        return 2
    if not trainer.is_main:  # rank 0 reports, and samples
        return 130 if result.status == "interrupted" else 0
    say = (lambda *a: None) if args.quiet else print
    val = "n/a" if result.val_loss is None else f"{result.val_loss:.4f}"
    say(
        f"\n{result.status} at step {result.step} in {result.seconds:.0f}s | final val loss {val}"
        f" | run {result.run_id}"
    )
    say(f"  checkpoint: {result.checkpoint}")
    if result.plot is not None:
        say(f"  loss curve: {result.plot}")
    say(f"  metrics:    {trainer.db_path} (plast runs; plast plot {result.run_id})")
    if result.status == "interrupted":
        return 130
    t = cfg.train
    if t.sample_tokens > 0 and not args.quiet:
        plast.manual_seed(t.seed)
        text = sample_text(
            trainer.model,
            trainer.data.tokenizer,
            t.sample_prompt,
            t.sample_tokens,
            t.sample_temperature,
            t.sample_top_k,
        )
        print(
            f"\nsample ({t.sample_tokens} tokens, temperature {t.sample_temperature}, top-k {t.sample_top_k}):"
        )
        print("-" * 72)
        print(text)
        print("-" * 72)
    return 0


def _cmd_sample(args) -> int:
    import plast
    from plast.errors import CheckpointError
    from plast.experiment.config import ConfigError
    from plast.experiment.trainer import load_for_sampling, sample_text

    try:
        model, tok, cfg, ck = load_for_sampling(args.path)
    except (CheckpointError, ConfigError, ValueError, OSError) as e:
        print(f"plast sample: {e}", file=sys.stderr)
        return 2
    if args.seed is not None:
        plast.manual_seed(args.seed)
    top_k = None if args.top_k is not None and args.top_k <= 0 else args.top_k
    print(sample_text(model, tok, args.prompt, args.max_new_tokens, args.temperature, top_k))
    return 0


def _tracker_for(run_keys: list[str], db: str | None, timeout: float = 10.0):
    """The tracker holding these runs: --db, else the database named by a run directory, else the default.
    A database locked for longer than `timeout` seconds exits with an error naming it and the lock holder."""
    import json

    from plast.experiment.tracker import Tracker

    if db is None:
        for key in run_keys:
            info = Path(key) / "run.json"
            if info.exists():
                db = json.loads(info.read_text())["db"]
                break
    db = db or DEFAULT_DB
    if not Path(db).exists():
        raise SystemExit(f"plast: no run database at {db} (train a run first, or pass --db)")
    return Tracker(db, busy_timeout=timeout)  # DatabaseLockedError: main() reports it


def _cmd_runs(args) -> int:
    import time

    import numpy as np

    tracker = _tracker_for([], args.db, args.timeout)
    rows = []
    for r in tracker.runs():
        last = tracker.last(r["id"])
        val = tracker.metrics(r["id"], "val_loss").value
        val = val[~np.isnan(val)]
        rows.append(
            [
                r["id"],
                r["name"] if r["name"] != r["id"] else "",
                r["status"],
                str(last.get("train_loss", (0, 0))[0]) if "train_loss" in last else "-",
                f"{last['train_loss'][1]:.4f}" if "train_loss" in last else "-",
                f"{last['val_loss'][1]:.4f}" if "val_loss" in last else "-",
                f"{val.min():.4f}" if len(val) else "-",
                time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"])),
            ]
        )
    head = ["run", "name", "status", "step", "train_loss", "val_loss", "best_val", "created"]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    if not rows:
        print(f"(no runs in {tracker.path})")
    return 0


def _resolve_runs(tracker, keys: list[str]) -> list[str]:
    import json

    ids = []
    for key in keys:
        info = Path(key) / "run.json"
        if info.exists():
            ids.append(json.loads(info.read_text())["run_id"])
            continue
        try:
            ids.append(tracker.find_run(key)["id"])
        except KeyError as e:
            raise SystemExit(f"plast: {e.args[0]}") from None
    return ids


def _cmd_plot(args) -> int:
    from plast.experiment.plots import curve_lines, plot_runs

    tracker = _tracker_for(args.runs, args.db, args.timeout)
    ids = _resolve_runs(tracker, args.runs)
    out = args.out or ("loss.png" if len(ids) > 1 else f"{ids[0]}.png")
    names = args.metric or ["train_loss", "val_loss"]
    fig = plot_runs(tracker, ids, out, names=names)
    print(f"wrote {out} ({len(curve_lines(fig))} curves of {len(ids)} run(s): {', '.join(names)})")
    return 0


def _cmd_export(args) -> int:
    tracker = _tracker_for([args.run], args.db, args.timeout)
    (run,) = _resolve_runs(tracker, [args.run])
    out = args.out or f"{run}.csv"
    n = tracker.export_csv(out, run)
    print(f"wrote {n} rows to {out}")
    return 0


RANK_ENV = "PLAST_TRAIN_RANKS"  # set in the ranks plast train --nproc starts: they train instead of launching


def _launch_ranks(args, nproc: int) -> int:
    """Start `nproc` ranks of this same command with mpiexec (plast.distributed.run: a rank that dies is named,
    a rank that hangs makes the others fail within the timeout), and return their exit code."""
    from plast.distributed import run

    # the ranks run what this process runs: `python -m X` again, else the script (the `plast` entry point)
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    module = spec is not None and bool(spec.name)
    target = spec.name if module else sys.argv[0]
    try:
        cmd = run.command(nproc, [target, *args.argv], args.hostfile, module=module)
    except FileNotFoundError as e:
        print(f"plast train: --nproc {nproc}: {e}", file=sys.stderr)
        return 2
    return run.launch(cmd, dict(run.environment(nproc), **{RANK_ENV: str(nproc)}))


def _cmd_show_config(args) -> int:
    import plast

    plast.show_config()
    return 0


def _timeout_arg(p) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up on a run database another process keeps locked after this long (default 10)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="plast", description="plast: train, sample and inspect runs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train a model (the default GPT with no arguments)")
    t.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [section.key=value ...]")
    t.add_argument("--show", action="store_true", help="print the resolved config and exit")
    t.add_argument("--quiet", "-q", action="store_true", help="no progress bar or log lines")
    t.add_argument(
        "--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint"
    )
    t.add_argument(
        "--nproc", type=int, metavar="N", help="train with N ranks on this machine (mpiexec; train.nproc)"
    )
    t.add_argument(
        "--strategy",
        choices=("ddp", "diloco"),
        help="ddp: average gradients every step; diloco: average every --inner-steps steps (train.strategy)",
    )
    t.add_argument("--inner-steps", type=int, metavar="H", help="DiLoCo's local steps (train.inner_steps)")
    t.add_argument("--hostfile", metavar="FILE", help="mpiexec host file, for ranks on several machines")
    t.set_defaults(fn=_cmd_train)

    s = sub.add_parser("sample", help="generate text from a run or checkpoint directory")
    s.add_argument("path", metavar="RUN_DIR|CHECKPOINT_DIR")
    s.add_argument("--prompt", default="", help="text to continue (default: none)")
    s.add_argument("--max-new-tokens", type=int, default=200)
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--top-k", type=int, default=40, help="sample from the k most likely tokens (0: all)")
    s.add_argument("--seed", type=int, default=None)
    s.set_defaults(fn=_cmd_sample)

    r = sub.add_parser("runs", help="list runs and their final metrics")
    r.add_argument("--db", default=None, help=f"run database (default {DEFAULT_DB})")
    _timeout_arg(r)
    r.set_defaults(fn=_cmd_runs)

    pl = sub.add_parser("plot", help="loss curves of one or several runs to a PNG")
    pl.add_argument("runs", nargs="+", metavar="RUN", help="run id, name or directory")
    pl.add_argument("--out", "-o", default=None, help="PNG path (default: RUN.png, or loss.png for several)")
    pl.add_argument(
        "--metric", action="append", help="metric to draw (repeatable; default train_loss, val_loss)"
    )
    pl.add_argument("--db", default=None)
    _timeout_arg(pl)
    pl.set_defaults(fn=_cmd_plot)

    e = sub.add_parser("export", help="a run's metrics as CSV")
    e.add_argument("run", metavar="RUN")
    e.add_argument("--out", "-o", default=None)
    e.add_argument("--db", default=None)
    _timeout_arg(e)
    e.set_defaults(fn=_cmd_export)

    c = sub.add_parser(
        "show-config", help="the installed plast distributions and build (plast.show_config())"
    )
    c.set_defaults(fn=_cmd_show_config)

    from plast.experiment import embed

    embed.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    args.argv = argv  # plast train --nproc starts its ranks with the same arguments
    from plast.experiment.tracker import DatabaseLockedError

    try:
        return args.fn(args)
    except DatabaseLockedError as e:  # a query of plast runs / plot / export that waited past --timeout
        print(f"plast: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a Ctrl-C outside the training loop (which handles its own)
        print("plast: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
