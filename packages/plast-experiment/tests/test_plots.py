"""Plots: one panel per metric, one curve per run, written as a valid PNG."""

import doctest

import numpy as np

from plast.experiment import plots as plots_module
from plast.experiment.plots import curve_lines, make_figure, plot_runs
from plast.experiment.tracker import Tracker

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _db(tmp_path, n_runs=3, steps=50):
    db = Tracker(tmp_path / "runs.db")
    runs = []
    for i in range(n_runs):
        run = db.start_run(f"run{i}")
        for s in range(1, steps + 1):
            db.log(run, s, "train_loss", 5.0 / s + i)
            if s % 10 == 0:
                db.log(run, s, "val_loss", 5.5 / s + i)
        runs.append(run)
    return db, runs


def test_png_with_one_curve_per_run_and_metric(tmp_path):
    db, runs = _db(tmp_path)
    out = tmp_path / "loss.png"
    fig = plot_runs(db, runs, out)
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    import matplotlib.image

    img = matplotlib.image.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 200
    lines = curve_lines(fig)
    assert len(lines) == 6  # 3 runs x (train_loss, val_loss)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["train loss", "val loss"]
    train_ax, val_ax = fig.axes
    assert [ln.get_label() for ln in train_ax.get_lines() if ln in lines] == ["run0", "run1", "run2"]
    np.testing.assert_array_equal(val_ax.get_lines()[0].get_xdata(), [10, 20, 30, 40, 50])


def test_subset_of_runs_and_metrics(tmp_path):
    db, runs = _db(tmp_path, n_runs=2, steps=10)
    fig = make_figure(db, runs[:1], names=["val_loss"], labels=["mine"])
    assert len(curve_lines(fig)) == 1 and curve_lines(fig)[0].get_label() == "mine"
    # a metric no run has is left out, so the figure never has an empty panel
    fig = make_figure(db, runs, names=["train_loss", "nothing"])
    assert len(fig.axes) == 1 and len(curve_lines(fig)) == 2


def test_docstring_examples_run():
    result = doctest.testmod(plots_module)
    assert result.attempted > 0 and result.failed == 0
