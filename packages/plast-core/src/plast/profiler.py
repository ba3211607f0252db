"""plast.profiler: where a step's time goes, per op, with torch.profiler's names.

    with plast.profiler.profile() as prof:
        train_step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))

Every kernel call the engine makes while a profile is active counts in a row keyed by what ran (graph/_timing.pyx):
an op's name (``matmul``, ``layer_norm_backward``...), a fused group's op names joined by ``+`` (``addmm+gelu``), a
fused optimizer update (``adam_update``), and with ``record_shapes=True`` the output shape too. Only kernels are
timed, so the profile also says how much of its wall time was *outside* kernels: Python, recording the lazy graph,
planning and memory, the per-op overhead plast exists to keep small (``prof.outside_kernels_us`` and the
table's last line). ``record_function(name)`` adds a row for a region of your code.

What differs from torch.profiler, on purpose or not yet: a row is a kernel call, not an ATen dispatch, so there
is no nesting and a row's self time is its total time; CUDA rows time the *launch* (kernels run asynchronously;
synchronize around a region, or use Nsight, for device time); there is no timeline, so ``export_chrome_trace``
and ``tensorboard_trace_handler`` raise NotImplementedError; ``profile_memory``, ``with_stack``,
``with_flops`` and ``with_modules`` are accepted and add nothing. Counting is process-wide: kernels other threads
run during the profile count too.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from .graph import _timing

__all__ = [
    "FunctionEventAvg",
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable:
    """torch.profiler.schedule: which action each ``prof.step()`` number gets (skip ``skip_first`` steps, then
    cycles of ``wait`` idle, ``warmup`` idle-but-ready and ``active`` recorded steps, ``repeat`` times, 0 = forever).

    >>> s = schedule(wait=1, warmup=1, active=2)
    >>> [s(i).name for i in range(5)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    for name, v in (
        ("wait", wait),
        ("warmup", warmup),
        ("active", active),
        ("repeat", repeat),
        ("skip_first", skip_first),
    ):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule: {name} must be an int >= 0, got {v!r}")
    if active == 0:
        raise ValueError("schedule: active must be at least 1")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if k == cycle - 1 else ProfilerAction.RECORD

    return action


def tensorboard_trace_handler(*args, **kwargs):
    raise NotImplementedError(
        "plast.profiler keeps per-op totals, not a timeline: there is no trace to hand to TensorBoard "
        "(read prof.key_averages() in on_trace_ready instead)"
    )


@dataclass
class FunctionEventAvg:
    """One row of ``key_averages()``: times in microseconds, as torch's."""

    key: str
    count: int
    self_cpu_time_total: float
    cpu_time_total: float
    input_shapes: list | None = None  # the output shape, with record_shapes (plast times kernels, not inputs)
    is_region: bool = False  # a record_function region: its total includes the kernels inside it

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0


_SORT_KEYS = {
    None: "self_cpu_time_total",
    "self_cpu_time_total": "self_cpu_time_total",
    "cpu_time_total": "cpu_time_total",
    "cpu_time": "cpu_time",
    "self_cpu_time": "self_cpu_time",
    "count": "count",
    # torch sorts by device time with these; plast's rows are host times (CUDA rows time the launch)
    "cuda_time_total": "cpu_time_total",
    "self_cuda_time_total": "self_cpu_time_total",
    "device_time_total": "cpu_time_total",
    "self_device_time_total": "self_cpu_time_total",
}


class EventList(list):
    """``key_averages()``'s rows, with torch's ``table()``."""

    def __init__(self, rows, wall_us: float = 0.0, kernel_us: float = 0.0):
        super().__init__(rows)
        self.wall_us = wall_us
        self.kernel_us = kernel_us

    def table(
        self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55, **_ignored
    ) -> str:
        if sort_by not in _SORT_KEYS:
            raise ValueError(
                f"table: sort_by must be one of {sorted(k for k in _SORT_KEYS if k)}, got {sort_by!r}"
            )
        attr = _SORT_KEYS[sort_by]
        rows = sorted(self, key=lambda e: getattr(e, attr), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        w = max([len("Name")] + [min(len(_name(e)), max_name_column_width) for e in rows])
        head = f"{'Name':<{w}}  {'Self CPU %':>10}  {'Self CPU':>10}  {'CPU total':>10}  {'CPU time avg':>12}  {'# of Calls':>10}"
        line = "-" * len(head)
        out = [line, head, line]
        base = self.wall_us or 1.0
        for e in rows:
            name = _name(e)[:max_name_column_width]
            out.append(
                f"{name:<{w}}  {100 * e.self_cpu_time_total / base:>9.2f}%  {_fmt(e.self_cpu_time_total):>10}  "
                f"{_fmt(e.cpu_time_total):>10}  {_fmt(e.cpu_time):>12}  {e.count:>10}"
            )
        out.append(line)
        outside = max(self.wall_us - self.kernel_us, 0.0)
        out.append(f"Self CPU time total: {_fmt(self.wall_us)}")
        out.append(
            f"In kernels: {_fmt(self.kernel_us)}; outside kernels (Python, recording, planning, memory): "
            f"{_fmt(outside)} ({100 * outside / base:.1f}%)"
        )
        return "\n".join(out)

    def __str__(self):
        return self.table()


def _name(e: FunctionEventAvg) -> str:
    return e.key if not e.input_shapes else f"{e.key} {list(e.input_shapes)}"


def _fmt(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_regions: list = []  # the open record_function regions, innermost last: [name, start ns, kernel ns at start]
_region_rows: dict = {}  # name -> [calls, wall ns, self ns]


class profile:
    """torch.profiler.profile over plast's kernel counters (see the module docstring for what it times).

    >>> import plast
    >>> with profile() as prof:
    ...     _ = (plast.ones(4, 4) @ plast.ones(4, 4)).tolist()
    >>> [e.key for e in prof.key_averages()]
    ['matmul']
    """

    def __init__(
        self,
        activities=None,
        *,
        schedule: Callable | None = None,
        on_trace_ready: Callable | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config=None,
        execution_trace_observer=None,
        acc_events: bool = False,
        use_cuda=None,
    ):
        if schedule is not None and not callable(schedule):
            raise TypeError(
                f"profile: schedule must be callable (see plast.profiler.schedule), got {schedule!r}"
            )
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile: on_trace_ready must be callable, got {on_trace_ready!r}")
        self.activities = set(activities) if activities is not None else {ProfilerActivity.CPU}
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.step_num = 0
        self._rows: dict = {}
        self._regions: dict = {}
        self._wall_ns = 0
        self._started = None  # perf_counter_ns when the current recording began, else None
        self._action = ProfilerAction.NONE

    # ---- recording ----
    def _begin(self):
        if _timing.active():
            raise RuntimeError("plast.profiler: a profile is already recording (profiles do not nest)")
        _region_rows.clear()
        _timing.start(self.record_shapes)
        self._started = time.perf_counter_ns()

    def _end(self):
        if self._started is None:
            return
        self._wall_ns += time.perf_counter_ns() - self._started
        self._started = None
        for k, (calls, ns) in _timing.stop().items():
            row = self._rows.setdefault(k, [0, 0])
            row[0] += calls
            row[1] += ns
        for k, (calls, wall, own) in _region_rows.items():
            row = self._regions.setdefault(k, [0, 0, 0])
            row[0] += calls
            row[1] += wall
            row[2] += own
        _region_rows.clear()

    def _reset(self):
        self._rows, self._regions, self._wall_ns = {}, {}, 0

    def start(self):
        self._action = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()
        return self

    def stop(self):
        recording = self._started is not None
        self._end()
        if recording and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def step(self):
        """Mark the end of a training step: with a schedule, recording starts and stops on its cycle and
        ``on_trace_ready(prof)`` runs at the end of each recorded cycle (with what that cycle recorded)."""
        self.step_num += 1
        if self.schedule is None:
            return
        prev, self._action = self._action, self.schedule(self.step_num)
        rec = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev in rec and (prev is ProfilerAction.RECORD_AND_SAVE or self._action not in rec):
            self._end()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if self._action in rec and self._started is None:
            self._reset()
            self._begin()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- results ----
    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """One row per op (per op and output shape with ``record_shapes``), as torch's ``key_averages()``."""
        rows = []
        kernel_ns = 0
        for k, (calls, ns) in self._rows.items():
            kernel_ns += ns
            name, shape = (k, None) if isinstance(k, str) else k
            rows.append(
                FunctionEventAvg(name, calls, ns / 1e3, ns / 1e3, [shape] if shape is not None else None)
            )
        if not group_by_input_shape:
            merged: dict = {}
            for e in rows:
                m = merged.get(e.key)
                if m is None:
                    merged[e.key] = FunctionEventAvg(e.key, e.count, e.self_cpu_time_total, e.cpu_time_total)
                else:
                    m.count += e.count
                    m.self_cpu_time_total += e.self_cpu_time_total
                    m.cpu_time_total += e.cpu_time_total
            rows = list(merged.values())
        for k, (calls, wall, own) in self._regions.items():
            rows.append(FunctionEventAvg(k, calls, own / 1e3, wall / 1e3, is_region=True))
        return EventList(rows, self._wall_ns / 1e3, kernel_ns / 1e3)

    @property
    def kernel_time_us(self) -> float:
        return sum(ns for _, ns in self._rows.values()) / 1e3

    @property
    def wall_time_us(self) -> float:
        return self._wall_ns / 1e3

    @property
    def outside_kernels_us(self) -> float:
        """Wall time of the recorded steps not spent in a kernel: Python, recording, planning, allocation."""
        return max(self.wall_time_us - self.kernel_time_us, 0.0)

    def events(self) -> EventList:
        return self.key_averages()

    def export_chrome_trace(self, path):
        raise NotImplementedError(
            "plast.profiler keeps per-op totals, not a timeline: no chrome trace to export"
        )

    def export_stacks(self, path, metric="self_cpu_time_total"):
        raise NotImplementedError("plast.profiler does not record stacks")


class record_function:
    """A named region in the profile (context manager or decorator), as torch.profiler.record_function: its row
    has the region's wall time as total and the part of it outside kernels as self time."""

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self._open = False

    def __enter__(self):
        if _timing.active():
            _regions.append([self.name, time.perf_counter_ns(), _timing.kernel_ns()])
            self._open = True
        return self

    def __exit__(self, *exc):
        if self._open:
            self._open = False
            name, t0, k0 = _regions.pop()
            wall = time.perf_counter_ns() - t0
            own = max(wall - (_timing.kernel_ns() - k0), 0)
            row = _region_rows.setdefault(name, [0, 0, 0])
            row[0] += 1
            row[1] += wall
            row[2] += own
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)

        return wrapped
