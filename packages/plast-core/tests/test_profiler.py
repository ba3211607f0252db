"""plast.profiler: per-op kernel times with torch.profiler's API (eager nodes, fused groups, jit replays, in-place
updates), schedules, record_function, and the torch alias."""

import numpy as np
import pytest

import plast
from plast.graph import _timing
from plast.profiler import ProfilerAction, profile, record_function, schedule


def _rows(prof):
    return {e.key: e for e in prof.key_averages()}


def test_eager_ops_are_counted_per_op_with_their_calls():
    a, b = plast.randn(64, 64), plast.randn(64, 64)
    with profile() as prof:
        for _ in range(3):
            c = (a @ b).sum()
            c.item()
    rows = _rows(prof)
    assert rows["matmul"].count == 3
    assert rows["matmul"].self_cpu_time_total > 0
    assert rows["matmul"].cpu_time_total == rows["matmul"].self_cpu_time_total
    assert prof.wall_time_us >= prof.kernel_time_us > 0
    assert prof.outside_kernels_us == pytest.approx(prof.wall_time_us - prof.kernel_time_us)
    assert not _timing.active()


def test_nothing_is_counted_outside_a_profile():
    a = plast.randn(8, 8)
    with profile() as prof:
        (a + a).tolist()
    (a @ a).tolist()  # after the profile: not in it
    with profile() as prof2:
        pass
    assert "matmul" not in _rows(prof)
    assert list(prof2.key_averages()) == []


def test_fused_groups_name_their_ops():
    x = plast.randn(16, 32)
    with profile() as prof:
        y = plast.exp(x * 2.0 + 1.0).tanh()
        y.tolist()
    keys = list(_rows(prof))
    fused = [k for k in keys if "+" in k]
    assert fused, keys
    assert any("exp" in k and "tanh" in k for k in fused), keys


def test_replayed_jit_steps_are_counted_per_call():
    w = plast.randn(32, 32)

    @plast.jit
    def f(x):
        return plast.tanh(x @ w).sum()

    x = plast.randn(8, 32)
    f(x).item()  # the trace
    f(x).item()  # compiled on the first replay
    with profile() as prof:
        for _ in range(4):
            f(x).item()
    rows = _rows(prof)
    assert rows["matmul"].count == 4, rows


def test_in_place_optimizer_updates_have_their_row():
    p, g = plast.ones(1000), plast.ones(1000)
    m, v, s = plast.zeros(1000), plast.zeros(1000), plast.zeros((), dtype=plast.float64)
    h = plast.tensor([0.1, 0.9, 0.999, 1e-8, 0.0], dtype=plast.float64)
    with profile() as prof:
        plast.adam_update_([p], [g], [m], [v], [s], h)
        plast.adam_update_([p], [g], [m], [v], [s], h)
    assert _rows(prof)["adam_update"].count == 2
    np.testing.assert_allclose(s.item(), 2.0)


def test_record_shapes_groups_by_output_shape():
    a, b = plast.randn(4, 8), plast.randn(8, 16)
    with profile(record_shapes=True) as prof:
        (a @ b).tolist()
        (b.t() @ a.t()).tolist()
    by_shape = prof.key_averages(group_by_input_shape=True)
    shapes = sorted(tuple(e.input_shapes[0]) for e in by_shape if e.key == "matmul")
    assert shapes == [(4, 16), (16, 4)]
    assert [e.count for e in prof.key_averages() if e.key == "matmul"] == [2]


def test_record_function_region_total_includes_its_kernels():
    a = plast.randn(128, 128)
    with profile() as prof:
        with record_function("my_block"):
            (a @ a @ a).tolist()
    region = _rows(prof)["my_block"]
    assert region.is_region and region.count == 1
    assert region.cpu_time_total >= region.self_cpu_time_total >= 0
    assert region.cpu_time_total >= _rows(prof)["matmul"].cpu_time_total


def test_record_function_outside_a_profile_and_as_a_decorator():
    @record_function("f")
    def f(x):
        return (x * 2).tolist()

    assert f(plast.ones(2)) == [2.0, 2.0]  # no profile: nothing recorded, no error
    with profile() as prof:
        f(plast.ones(2))
        f(plast.ones(2))
    assert _rows(prof)["f"].count == 2


def test_profiles_do_not_nest():
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profile():
                pass
    assert not _timing.active()


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_schedule_actions_match_torch():
    torch_profiler = pytest.importorskip("torch.profiler")
    for kw in (
        dict(wait=1, warmup=1, active=2),
        dict(wait=0, warmup=0, active=1, repeat=2),
        dict(wait=2, warmup=1, active=3, repeat=1, skip_first=2),
    ):
        ours, theirs = schedule(**kw), torch_profiler.schedule(**kw)
        assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)], kw


def test_schedule_records_each_active_cycle_and_hands_it_over():
    a = plast.randn(16, 16)
    seen = []
    sched = schedule(wait=1, warmup=1, active=2, repeat=2)
    with profile(schedule=sched, on_trace_ready=lambda p: seen.append(_rows(p)["matmul"].count)) as prof:
        for _ in range(10):
            (a @ a).tolist()
            prof.step()
    assert seen == [2, 2]
    assert sched(3) is ProfilerAction.RECORD_AND_SAVE


def test_table_reads_like_torchs():
    a = plast.randn(32, 32)
    with profile() as prof:
        (a @ a).relu().sum().tolist()
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Self CPU %" in text and "# of Calls" in text and "matmul" in text
    assert "outside kernels" in text
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")
    with pytest.raises(NotImplementedError, match="timeline"):
        prof.export_chrome_trace("/tmp/x.json")


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="active"):
        schedule(wait=0, warmup=0, active=0)
    with pytest.raises(ValueError, match="wait"):
        schedule(wait=-1, warmup=0, active=1)
    with pytest.raises(TypeError, match="schedule"):
        profile(schedule=3)
    with pytest.raises(TypeError, match="name"):
        record_function(3)


def test_a_torch_profiling_snippet_runs_on_both(tmp_path):
    """The common torch.profiler idiom runs unchanged through plast.torch."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    script = tmp_path / "prof.py"
    script.write_text(
        "import torch\n"
        "from torch.profiler import profile, record_function, ProfilerActivity\n"
        "a = torch.randn(64, 64)\n"
        "with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:\n"
        "    with record_function('step'):\n"
        "        b = (a @ a).relu().sum()\n"
        "        b.item()\n"
        "t = prof.key_averages().table(sort_by='cpu_time_total', row_limit=10)\n"
        "print('ROWS', sorted(e.key for e in prof.key_averages())[:50])\n"
    )
    for runner in ([sys.executable], [sys.executable, "-m", "plast.torch"]):
        out = subprocess.run([*runner, str(script)], capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "step" in out.stdout and ("matmul" in out.stdout or "aten::mm" in out.stdout), out.stdout
