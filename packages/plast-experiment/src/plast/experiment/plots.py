"""Loss and metric curves of one or several runs, drawn with matplotlib (Agg backend) into a PNG.

One panel per metric name; in each, one line per run that has the metric. Training loss is drawn raw (thin,
translucent) with an exponential moving average on top, so a noisy curve stays readable; the smoothed line is
the one labelled with the run.

>>> import os, tempfile
>>> from plast.experiment.tracker import Tracker
>>> db = Tracker(os.path.join(tempfile.mkdtemp(), "runs.db"))
>>> run = db.start_run("demo")
>>> for s in range(20):
...     db.log(run, s, "train_loss", 3.0 / (s + 1))
>>> fig = make_figure(db, [run], names=["train_loss"])
>>> len(curve_lines(fig))
1
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["curve_lines", "make_figure", "plot_runs"]

_RAW = "_raw"  # gid of the unsmoothed training-loss lines (drawn under their smoothed twin)


def _ema(values: np.ndarray, alpha: float = 0.1) -> np.ndarray:
    out = np.empty_like(values)
    acc = values[0] if len(values) else 0.0
    for i, v in enumerate(values):
        acc = alpha * v + (1 - alpha) * acc
        out[i] = acc
    return out


def make_figure(tracker, runs, names=("train_loss", "val_loss"), labels=None):
    """A matplotlib Figure (not shown, not saved) with one panel per metric in `names` and one curve per run.

    `runs` are run ids; `labels` (default: the runs' names) label their curves.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    info = {r["id"]: r for r in tracker.runs()}
    labels = list(labels) if labels is not None else [info.get(r, {}).get("name", r) for r in runs]
    names = [n for n in names if any(len(tracker.metrics(r, n).step) for r in runs)] or list(names[:1])
    fig = Figure(figsize=(6.4 * len(names), 4.2), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        for i, (run, label) in enumerate(zip(runs, labels)):
            s = tracker.metrics(run, name)
            if not len(s.step):
                continue
            color = f"C{i % 10}"
            if name == "train_loss" and len(s.step) > 20:
                (raw,) = ax.plot(s.step, s.value, color=color, alpha=0.25, linewidth=0.7)
                raw.set_gid(_RAW)
                ax.plot(s.step, _ema(s.value), color=color, linewidth=1.6, label=label)
            else:
                marker = "o" if len(s.step) <= 30 else None
                ax.plot(s.step, s.value, color=color, linewidth=1.6, marker=marker, markersize=3, label=label)
        ax.set_title(name.replace("_", " "))
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize="small")
    return fig


def curve_lines(fig) -> list:
    """The labelled curves of a figure made by ``make_figure`` (one per run and metric; raw training-loss
    traces, drawn under their smoothed line, are left out)."""
    return [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() != _RAW]


def plot_runs(tracker, runs, path: str | os.PathLike, names=("train_loss", "val_loss"), labels=None, dpi=110):
    """Draw `runs`' curves of the metrics `names` into the PNG file `path`; returns the Figure."""
    fig = make_figure(tracker, runs, names=names, labels=labels)
    tmp = f"{os.fspath(path)}.part.png"
    fig.savefig(tmp, dpi=dpi, format="png")
    os.replace(tmp, path)
    return fig
