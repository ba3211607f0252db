"""plast and PyTorch side by side on the DESIGN §6 standard workloads, in one process run.

    python bench/run.py                          # everything, 1 and 2 threads (< 10 minutes on 2 cores)
    python bench/run.py --quick                  # CI smoke: fewer steps, 1 thread, no RSS (~2 minutes)
    python bench/run.py --only xor,mlp --threads 1 --out /tmp/b.json
    python bench/run.py --rss-child gpt plast    # one peak-RSS measurement (the harness runs these itself)

Sections (--only): xor, mlp, gpt, gpt_sdpa (training steps), gen (greedy decoding), rss (peak memory, one child
process per workload and framework), micro (bench/micro.py: GEMM, elementwise and reduction kernels).

Training: each workload is built once for torch, plast eager and plast under @plast.jit, from the same initial
weights and batch (torch's, copied), so the first steps' losses must agree (checked, shown as "loss ok").
Each framework warms up, then the timed steps run in interleaved blocks (torch, plast, plast.jit, rotating
the order each block), so machine noise hits all of them. A step is zero_grad + forward + loss + backward +
optimizer step, timed with perf_counter; plast's includes reset_transient_arenas(). Reported: median with p10-p90
in ms, and plast/torch as the ratio of medians with the range of the per-block ratios. Steps are capped by a time
budget per workload, so a slow implementation is measured with fewer steps (the JSON says how many) rather than
blowing the run's time; "bg" is the CPU time other processes used meanwhile, in CPUs.

Definitions come from ../shared/bench/workloads.json when it is there, else from the copy of its numbers below.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED_SPEC = HERE.parent.parent / "shared" / "bench" / "workloads.json"

# The numbers of ../shared/bench/workloads.json that the workloads use (that file wins when present).
BUILTIN_SPEC = {
    "common": {"dtype": "float32", "seed": 0, "warmup": 10, "steps": 100},
    "xor": {
        "layers": [2, 8, 1],
        "batch": 4,
        "optim": {"name": "sgd", "lr": 0.1, "momentum": 0.0},
        "steps": 200,
    },
    "mlp": {
        "layers": [784, 512, 512, 10],
        "batch": 128,
        "optim": {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
    },
    "gpt": {
        "vocab_size": 65,
        "block_size": 64,
        "n_layer": 4,
        "n_head": 4,
        "n_embd": 128,
        "dropout": 0.0,
        "batch": 16,
        "bias": True,
        "optim": {"name": "adamw", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
        "steps": 50,
    },
    "gen": {"prompt": [0], "new_tokens": 200, "reps": 3},
}

TRAIN = ("xor", "mlp", "gpt", "gpt_sdpa")
GEN_VARIANTS = (("nocache", False), ("kvcache", True))
GEN_BLOCK = 256
SECTIONS = TRAIN + ("rss", "micro", "gen")  # gen last: uncached decoding is the slowest thing here
# seconds of measuring per workload and thread count (all frameworks together), full and --quick
BUDGET = {"xor": (8, 3), "mlp": (25, 6), "gpt": (40, 10), "gpt_sdpa": (35, 8), "gen": (20, 6)}
TOTAL = (550, 110)  # the whole run's budget, seconds; plast runs that would start past it are skipped
# seconds kept for these sections while earlier ones run
RESERVE = {"rss": (100, 30), "micro": (90, 45), "gen": (60, 15)}
RSS_TIMEOUT = 90


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load_spec():
    if SHARED_SPEC.is_file():
        try:
            return json.loads(SHARED_SPEC.read_text()), str(SHARED_SPEC)
        except ValueError as e:
            log(f"warning: {SHARED_SPEC} is not valid JSON ({e}); using the built-in definitions")
    return BUILTIN_SPEC, "built-in (bench/run.py)"


def workload_spec(spec, name):
    """The dict for one workload, with the common seed, warm-up and step counts merged in."""
    base = "gpt" if name in ("gpt_sdpa", "gen") else name
    com = spec["common"]
    w = dict(spec[base])
    w.setdefault("warmup", com["warmup"])
    w.setdefault("steps", com["steps"])
    w["seed"] = com["seed"]
    return w


def stats(xs):
    xs = sorted(xs)
    if not xs:
        return None
    q = statistics.quantiles(xs, n=20, method="inclusive") if len(xs) > 1 else [xs[0]] * 19
    return {
        "median": statistics.median(xs),
        "p10": q[1],
        "p25": q[4],
        "p75": q[14],
        "p90": q[17],
        "min": xs[0],
        "max": xs[-1],
        "n": len(xs),
    }


class LoadMonitor:
    """CPU time that other processes used during a measurement, in CPUs (0..cores): machine busy time from
    /proc/stat minus our own (and our children's) CPU time, over wall time. Above ~0.1 the machine was shared."""

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        except (OSError, ValueError):
            return float("nan")

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __enter__(self):
        self.t0, self.b0, self.o0 = time.perf_counter(), self._busy(), self._own()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        other = (self._busy() - self.b0) - (self._own() - self.o0)
        self.bg_cpus = round(max(0.0, other / wall), 2) if wall > 0 else float("nan")
        return False


# --- training: interleaved timing -----------------------------------------------------------------------------


class Runner:
    """A workload object of one framework (``step(read)``, ``label``) plus its measurements."""

    def __init__(self, work):
        self.work, self.label = work, work.label
        self.first_ms = None
        self.times = []  # timed steps, ms
        self.blocks = []  # per-block medians, ms (None where the runner had no step in that block)
        self.warm_times = []
        self.losses = []  # the first steps' losses, for the cross-framework check
        self.error = None
        self.est = None

    def one(self, read=False):
        t0 = time.perf_counter()
        v = self.work.step(read=read)
        ms = (time.perf_counter() - t0) * 1e3
        if read:
            self.losses.append(v)
        return ms

    def warm(self, n_max, budget_s, n_read, share):
        """The first step (if not taken yet), then up to n_max warm-up steps within budget_s; sets `est`."""
        t_start = time.perf_counter()
        if self.first_ms is None:
            self.first_ms = self.one(read=n_read > 0)
            n_read -= 1
        done = []
        # NOTE: at least one step after the first (a jit trace, a plan-cache miss) unless that alone was too slow
        while len(done) < n_max and (
            (time.perf_counter() - t_start) < budget_s or (not done and self.first_ms < 4e3 * share)
        ):
            done.append(self.one(read=len(done) < n_read))
        self.warm_times += done
        self.est = (statistics.median(done[-3:]) if done else self.first_ms) / 1e3


def interleave(runners, shares, max_steps, blocks, limit_s):
    """Timed steps in `blocks` rounds; runner r gets about shares[r] seconds of steps in all (at least one step
    in total, at most max_steps). Each round rotates the order; cheap runners take one untimed step first so the
    previous framework's spinning threads and cache state do not land in their first timed step."""
    plan = []
    for r, share in zip(runners, shares):
        n = int(min(max_steps, max(1, share / max(r.est, 1e-6))))
        per = [n // blocks + (1 if i < n % blocks else 0) for i in range(blocks)]
        plan.append(per)
    t0 = time.perf_counter()
    for b in range(blocks):
        if b and time.perf_counter() - t0 > limit_s:  # the machine got slower than the warm-up said
            break
        order = list(range(len(runners)))
        k = b % len(order)
        order = order[k:] + order[:k]
        for i in order:
            r, n = runners[i], plan[i][b]
            if n == 0 or r.error is not None:
                r.blocks.append(None)
                continue
            try:
                if r.est < 0.05:
                    r.one()
                ts = [r.one() for _ in range(n)]
            except Exception as e:  # noqa: BLE001 - a plast bug must not stop the others
                r.error = f"failed: {type(e).__name__}: {e}"[:400]
                r.blocks.append(None)
                continue
            r.times += ts
            r.blocks.append(statistics.median(ts))


def _loss_check(runners):
    ref = runners[0].losses
    out = {}
    for r in runners[1:]:
        k = min(len(ref), len(r.losses))
        if k == 0:
            continue
        diff = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(ref[:k], r.losses[:k]))
        out[r.label] = {"steps": k, "max_rel_diff": diff, "ok": diff < 1e-3}
    return out


def bench_train(name, spec, threads, quick, deadline):
    import workloads_plast as wp
    import workloads_torch as wt

    w = workload_spec(spec, name)
    full_budget = BUDGET[name][1 if quick else 0]
    warmup = 3 if quick else w["warmup"]
    max_steps = max(10, w["steps"] // 5) if quick else w["steps"]
    res = {"spec": w, "frameworks": {}, "threads": {}}

    torch_w = wt.build_train(name, w)
    state, data = torch_w.state()
    runners = [Runner(torch_w)]
    for jit in (False, True):
        label = "plast.jit" if jit else "plast"
        try:
            runners.append(Runner(wp.build_train(name, w, state, data, jit=jit)))
            res["frameworks"][label] = {"status": "ok"}
        except wp.Skip as e:
            res["frameworks"][label] = {"status": f"skipped: {e}"}
        except Exception as e:  # noqa: BLE001 - a plast bug must not stop the harness
            res["frameworks"][label] = {"status": f"failed while building: {type(e).__name__}: {e}"[:400]}
    res["frameworks"]["torch"] = {"status": "ok", "params": torch_w.params}

    for ti, nt in enumerate(threads):
        wt.set_threads(nt)
        wp.set_threads(nt)
        budget = full_budget
        if time.time() + budget > deadline:
            for r in runners[1:]:
                if r.error is None:
                    r.error = "skipped: the run's time budget is spent"
        live = [r for r in runners if r.error is None]
        share = budget / len(live)
        with LoadMonitor() as lm:
            for r in list(live):
                if r.label == "plast.jit" and ti == 0:
                    eager = next((x for x in live if x.label == "plast"), None)
                    if eager is not None and eager.est is not None and eager.est > share:
                        r.error = (
                            f"skipped: the eager step ({eager.est:.1f} s) is over this workload's budget"
                        )
                        live.remove(r)
                        continue
                try:
                    r.warm(warmup, 0.3 * share, n_read=3 if ti == 0 else 0, share=share)
                except Exception as e:  # noqa: BLE001
                    r.error = f"failed: {type(e).__name__}: {e}"[:400]
                    live.remove(r)
                    continue
            fast = [r for r in live if r.est <= share]
            for r in live:
                r.times, r.blocks = [], []
            blocks = 1 if quick else 5
            interleave(fast, [0.7 * share] * len(fast), max_steps, blocks, limit_s=1.2 * budget)
        cell = {"bg_cpus": lm.bg_cpus, "budget_s": budget}
        torch_r = runners[0]
        for r in runners:
            if r.error is not None:
                cell[r.label] = {"status": r.error}
                continue
            rough = not r.times
            times = r.times or r.warm_times[-3:] or [r.first_ms]
            entry = {
                "ms": stats(times),
                "first_step_ms": r.first_ms,
                "warmup_steps": len(r.warm_times),
                "rough": rough,
            }
            if rough:
                entry["note"] = (
                    "slower than this workload's budget: warm-up steps only"
                    if r.warm_times
                    else "slower than this workload's budget: the first step only (with planning / jit trace)"
                )
            if r is not torch_r and torch_r.times:
                entry["ratio"] = entry["ms"]["median"] / cell["torch"]["ms"]["median"]
                br = [a / b for a, b in zip(r.blocks, torch_r.blocks) if a is not None and b is not None]
                entry["block_ratios"] = stats(br) if br else None
            cell[r.label] = entry
            r.warm_times = []
        res["threads"][f"t{nt}"] = cell
        if ti == 0:
            res["loss_check"] = _loss_check(runners)
            res["first_losses"] = {r.label: r.losses for r in runners}
        log(
            f"  {name} t{nt}: "
            + ", ".join(
                f"{r.label} {cell[r.label]['ms']['median']:.3g} ms"
                if "ms" in cell[r.label]
                else f"{r.label} -"
                for r in runners
            )
            + f"  (bg {lm.bg_cpus})"
        )

    eager = next((r for r in runners if r.label == "plast" and r.error is None), None)
    if eager is not None and (eager.est or 1e9) < 2.0:
        wp.set_threads(threads[0])
        try:
            n_ops = wp.count_recorded(eager.work.step)
            res["ops_per_step"] = n_ops
            for label in ("plast", "plast.jit"):
                e = res["threads"][f"t{threads[0]}"].get(label, {})
                if "ms" in e and n_ops:
                    e["us_per_op"] = e["ms"]["median"] * 1e3 / n_ops
        except Exception as e:  # noqa: BLE001
            res["ops_per_step"] = f"failed: {type(e).__name__}: {e}"[:300]
    return res


# --- generation -----------------------------------------------------------------------------------------------


def bench_gen(spec, threads, quick, deadline):
    import workloads_plast as wp
    import workloads_torch as wt

    g, w = dict(spec["gen"]), workload_spec(spec, "gen")
    reps = 1 if quick else g.get("reps", 3)
    res = {"spec": {"gen": g, "block_size": GEN_BLOCK}, "variants": {}}
    for vname, use_cache in GEN_VARIANTS:
        tw = wt.GenWorkload(w, g, GEN_BLOCK, use_cache)
        out = {"threads": {}}
        try:
            pw = wp.GenWorkload(w, g, GEN_BLOCK, use_cache, state=tw.state())
            status = "ok"
        except wp.Skip as e:
            pw, status = None, f"skipped: {e}"
        except Exception as e:  # noqa: BLE001
            pw, status = None, f"failed while building: {type(e).__name__}: {e}"[:400]
        out["plast_status"] = status
        torch_est = {}  # seconds per torch run of this variant, for the time gate
        est = None  # seconds per plast run, from its last one
        for ti, nt in enumerate(threads):
            wt.set_threads(nt)
            wp.set_threads(nt)
            budget = BUDGET["gen"][1 if quick else 0]
            run_plast, why, rough = pw is not None, None, False
            if time.time() + max(budget, 2 * torch_est.get(vname, 0)) > deadline:
                out["threads"][f"t{nt}"] = {"status": "skipped: the run's time budget is spent"}
                continue
            if run_plast and time.time() + 2 * budget > deadline:
                run_plast, why = False, "skipped: the run's time budget is spent"
            if run_plast and est is not None and est > budget:
                run_plast, why = False, f"skipped: one run took {est:.1f} s, over the {budget} s budget"
            times = {"torch": [], "plast": []}
            toks = {}
            with LoadMonitor() as lm:
                t0 = time.perf_counter()
                if ti == 0:
                    toks["torch"] = tw.run()  # warm-up
                if run_plast and est is None:
                    try:
                        s = time.perf_counter()
                        toks["plast"] = pw.run()  # warm-up (plans, caches)
                        est = time.perf_counter() - s
                    except Exception as e:  # noqa: BLE001
                        pw, run_plast = None, False
                        out["plast_status"] = f"failed: {type(e).__name__}: {e}"[:400]
                    if run_plast and est > budget / 2:  # too slow to repeat: its warm-up run is the figure
                        times["plast"], run_plast, rough = [est], False, True
                for i in range(reps):
                    if i and (time.perf_counter() - t0 > budget or time.time() > deadline):
                        break
                    pair = [("torch", tw)] + ([("plast", pw)] if run_plast else [])
                    for label, wk in pair if i % 2 == 0 else pair[::-1]:
                        s = time.perf_counter()
                        toks[label] = wk.run()
                        times[label].append(time.perf_counter() - s)
                    torch_est[vname] = times["torch"][-1]
                    if run_plast:
                        est = times["plast"][-1]
            cell = {"bg_cpus": lm.bg_cpus}
            for label, ts in times.items():
                if not ts:
                    continue
                n = g["new_tokens"]
                cell[label] = {
                    "tokens_per_s": stats([n / t for t in ts]),
                    "ms_per_token": stats([t * 1e3 / n for t in ts]),
                }
            if why is not None:
                cell["plast"] = {"status": why}
            if "tokens_per_s" in cell.get("plast", {}):
                cell["plast"]["rough"] = rough
                cell["plast"]["ratio"] = (
                    cell["plast"]["ms_per_token"]["median"] / cell["torch"]["ms_per_token"]["median"]
                )
                same = [a == b for a, b in zip(toks["torch"], toks["plast"])]
                cell["plast"]["tokens_match_torch"] = all(same) and len(toks["torch"]) == len(toks["plast"])
                cell["plast"]["first_mismatch"] = same.index(False) if not all(same) else None
            if ti == 0:
                out["first_tokens"] = {k: v[:12] for k, v in toks.items()}
                out["_tokens"] = toks
            out["threads"][f"t{nt}"] = cell
            log(
                f"  gen.{vname} t{nt}: "
                + ", ".join(
                    f"{k} {v['tokens_per_s']['median']:.0f} tok/s"
                    for k, v in cell.items()
                    if isinstance(v, dict) and "tokens_per_s" in v
                )
            )
        res["variants"][vname] = out
    a, b = (res["variants"][v].pop("_tokens", {}) for v, _ in GEN_VARIANTS)
    res["kvcache_matches_nocache"] = {k: a[k] == b[k] for k in a if k in b}
    return res


# --- peak RSS in child processes ------------------------------------------------------------------------------


def _maxrss_mb():
    """Peak resident memory of this process, MB. On Linux from VmHWM: ru_maxrss survives fork and exec, so in a
    child it starts at the parent's peak (this harness's, with torch and every model loaded)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / 2**20  # kB on Linux, bytes on macOS


def rss_child(workload, framework, quick):
    """Build one workload in one framework (only that framework imported), run a few steps, print JSON."""
    spec, _ = load_spec()
    out = {"workload": workload, "framework": framework}
    if framework == "torch":
        import workloads_torch as wm
    else:
        import workloads_plast as wm
    wm.set_threads(1)
    out["import_mb"] = _maxrss_mb()
    t0 = time.perf_counter()
    limit = 5 if quick else 15
    try:
        if workload == "gen":
            w, g = workload_spec(spec, "gen"), spec["gen"]
            # NOTE: the cached variant only; the uncached one can take a minute per run in plast today
            wm.GenWorkload(w, g, GEN_BLOCK, True).run()
            steps = 1
        else:
            w = workload_spec(spec, workload)
            if framework == "torch":
                wk = wm.build_train(workload, w)
            else:
                wk = wm.build_train(workload, w, jit=framework == "plast.jit")
            steps = 0
            while steps < (3 if quick else w["warmup"] + 5) and (
                steps < 2 or time.perf_counter() - t0 < limit
            ):
                wk.step()
                steps += 1
        out.update(status="ok", steps=steps, peak_mb=_maxrss_mb())
        out["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except Exception as e:  # noqa: BLE001
        skip = type(e).__name__ == "Skip"
        out["status"] = (f"skipped: {e}" if skip else f"failed: {type(e).__name__}: {e}")[:400]
    out["torch_imported"] = "torch" in sys.modules
    out["plast_imported"] = "plast" in sys.modules
    print(json.dumps(out))


def bench_rss(workloads, quick, deadline):
    res = {}
    for wl in workloads:
        fws = ("torch", "plast") if wl == "gen" else ("torch", "plast", "plast.jit")
        for fw in fws:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--rss-child", wl, fw] + (
                ["--quick"] if quick else []
            )
            left = deadline - time.time()
            if left < 10:
                res.setdefault(wl, {})[fw] = {"status": "skipped: the run's time budget is spent"}
                continue
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=min(RSS_TIMEOUT, left))
                line = (p.stdout.strip().splitlines() or ["{}"])[-1]
                r = json.loads(line) if line.startswith("{") else {}
                if not r:
                    r = {"status": f"failed: exit {p.returncode}: {p.stderr.strip()[-300:]}"}
            except subprocess.TimeoutExpired:
                r = {"status": f"failed: over {min(RSS_TIMEOUT, left):.0f} s"}
            res.setdefault(wl, {})[fw] = r
            log(f"  rss {wl} {fw}: {r.get('peak_mb', r.get('status'))}")
    return res


# --- micro benchmarks -----------------------------------------------------------------------------------------


def bench_micro(quick, threads, deadline):
    """micro.py in child processes, one per part, so running out of time loses one part, not all."""
    import micro

    out = HERE / "results" / ".micro.json"
    out.parent.mkdir(exist_ok=True)
    merged = {}
    for part, key in (("gemm", "gemm"), ("overhead", "matmul_overhead"), ("bandwidth", "bandwidth")):
        left = deadline - time.time()
        if left < 10:
            merged[key] = "skipped: the run's time budget is spent"
            continue
        cmd = [sys.executable, str(HERE / "micro.py"), "--only", part, "--json", str(out), "--threads"]
        cmd += [str(t) for t in threads] + (["--quick"] if quick else [])
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            merged[key] = f"failed: over the run's time budget ({left:.0f} s left)"
            continue
        if p.returncode or not out.is_file():
            merged[key] = f"failed: exit {p.returncode}: {p.stderr.strip()[-400:]}"
            continue
        r = json.loads(out.read_text())
        out.unlink()
        merged[key] = r[key]
        for k, v in r.items():
            if k not in ("gemm", "matmul_overhead", "bandwidth"):
                merged.setdefault(k, v)
    return merged, micro.report(merged)


# --- report ---------------------------------------------------------------------------------------------------


def _num(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def _ms(e):
    if not isinstance(e, dict) or "ms" not in e:
        return "-"
    s = e["ms"]
    if s["n"] == 1:
        return ("~" if e.get("rough") else "") + _num(s["median"])
    return ("~" if e.get("rough") else "") + f"{_num(s['median'])} [{_num(s['p10'])}-{_num(s['p90'])}]"


def _ratio(e):
    if not isinstance(e, dict) or "ratio" not in e:
        return "-"
    br = e.get("block_ratios")
    rng = f" [{br['min']:.2f}-{br['max']:.2f}]" if br and br["n"] > 1 else ""
    return ("~" if e.get("rough") else "") + f"{e['ratio']:.2f}{rng}"


def print_report(R):
    v = R["versions"]
    print(
        f"\nplast {v['plast']} ({R['plast_config']}) vs torch {v['torch']}; numpy {v['numpy']}; "
        f"{R['machine']['cores']} cores, {R['machine']['cpu']}"
    )
    print(f"workloads: {R['spec_source']}")
    tr = R["results"].get("train", {})
    if tr:
        print(
            "\ntraining step, ms: median [p10-p90]; ratio = plast/torch medians [range over interleaved blocks]"
        )
        head = f"{'workload':9} {'thr':>3}  {'torch':22} {'plast eager':24} {'ratio':17} {'plast.jit':24} {'ratio':17} {'loss':5} {'bg':>4}"
        print(head)
        print("-" * len(head))
        for name, r in tr.items():
            if "error" in r:
                print(f"{name:9}      FAILED: {r['error'][:150]}")
                continue
            ok = all(c["ok"] for c in r.get("loss_check", {}).values())
            loss = ("ok" if ok else "DIFF") if r.get("loss_check") else "-"
            for tk, c in r["threads"].items():
                p, j = c.get("plast"), c.get("plast.jit")
                print(
                    f"{name:9} {tk[1:]:>3}  {_ms(c['torch']):22} {_ms(p):24} {_ratio(p):17} {_ms(j):24} "
                    f"{_ratio(j):17} {loss:5} {c['bg_cpus']:4.2f}"
                )
        notes = []
        for name, r in tr.items():
            for label in ("plast", "plast.jit"):
                st = r.get("frameworks", {}).get(label, {}).get("status", "ok")
                if st != "ok":
                    notes.append(f"{name} {label}: {st}")
                    continue
                for tk, c in r.get("threads", {}).items():
                    e = c.get(label, {})
                    if "status" in e:
                        notes.append(f"{name} {label} t{tk[1:]}: {e['status']}")
                    elif e.get("rough"):
                        notes.append(f"{name} {label} t{tk[1:]}: ~ {e['note']} ({e['ms']['n']})")
        for n in notes:
            print("  " + n)
        xo = tr.get("xor", {})
        if isinstance(xo.get("ops_per_step"), int):
            t = next(iter(xo["threads"].values()))
            parts = [
                f"{lab} {t[lab]['us_per_op']:.1f} us/op"
                for lab in ("plast", "plast.jit")
                if "us_per_op" in t.get(lab, {})
            ]
            print(f"  xor: {xo['ops_per_step']} graph nodes recorded per eager step; " + ", ".join(parts))
    gen = R["results"].get("gen")
    if gen:
        print(
            "\ngeneration, greedy 200 tokens, block 256: tokens/s median [min-max]; ratio = plast/torch time per token"
        )
        for vname, o in gen["variants"].items():
            for tk, c in o["threads"].items():
                if "status" in c:
                    print(f"gen.{vname:8} {tk[1:]:>3}  {c['status']}")
                    continue
                cols = []
                for label in ("torch", "plast"):
                    e = c.get(label)
                    if e and "tokens_per_s" in e:
                        s, mark = e["tokens_per_s"], "~" if e.get("rough") else ""
                        cols.append(f"{label} {mark}{_num(s['median'])} [{_num(s['min'])}-{_num(s['max'])}]")
                    elif e:
                        cols.append(f"{label} {e['status']}")
                if "ratio" in c.get("plast", {}):
                    e = c["plast"]
                    mark = "~" if e.get("rough") else ""
                    cols.append(
                        f"ratio {mark}{e['ratio']:.2f}, same tokens as torch: {e['tokens_match_torch']}"
                    )
                print(f"gen.{vname:8} {tk[1:]:>3}  " + "   ".join(cols) + f"   bg {c['bg_cpus']:.2f}")
            if o["plast_status"] != "ok":
                print(f"  gen.{vname} plast: {o['plast_status']}")
        print(f"  kv cache gives the same tokens as no cache: {gen['kvcache_matches_nocache']}")
    rss = R["results"].get("rss")
    if rss:
        print("\npeak RSS, MB (separate process per workload and framework; after imports in parentheses)")
        for wl, fws in rss.items():
            cols = []
            for fw, r in fws.items():
                if r.get("status") == "ok":
                    cols.append(f"{fw} {r['peak_mb']:.0f} ({r['import_mb']:.0f})")
                else:
                    cols.append(f"{fw} {r.get('status', '?')[:90]}")
            t = fws.get("torch", {})
            for fw in ("plast", "plast.jit"):
                if "peak_mb" in t and "peak_mb" in fws.get(fw, {}):
                    cols.append(f"{fw}/torch {fws[fw]['peak_mb'] / t['peak_mb']:.2f}")
            print(f"{wl:9}  " + "   ".join(cols))
    if R.get("micro_text"):
        print("\n" + R["micro_text"].rstrip())
    elif "status" in R["results"].get("micro", {}):
        print(f"\nmicro: {R['results']['micro']['status']}")
    print(f"\ntotal {R['total_seconds']:.0f} s")


# --- driver ---------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--out", default=str(HERE / "results" / "latest.json"), help="JSON results (default %(default)s)"
    )
    ap.add_argument("--only", default=None, help=f"comma-separated sections out of {','.join(SECTIONS)}")
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1,2; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="fewer steps, one thread, no RSS: a smoke run")
    ap.add_argument("--rss-child", nargs=2, metavar=("WORKLOAD", "FRAMEWORK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    if args.rss_child:
        return rss_child(*args.rss_child, args.quick)

    only = args.only.split(",") if args.only else [s for s in SECTIONS if not (args.quick and s == "rss")]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {','.join(SECTIONS)}")
    threads = [int(t) for t in (args.threads or ("1" if args.quick else "1,2")).split(",")]
    t_start = time.time()
    q = 1 if args.quick else 0

    import io
    from contextlib import redirect_stdout

    import numpy as np
    import torch

    import plast

    spec, source = load_spec()
    buf = io.StringIO()
    with redirect_stdout(buf):
        plast.show_config()
    cfg = {
        k.strip(): v.strip()
        for k, _, v in (ln.strip().partition("  ") for ln in buf.getvalue().splitlines()[1:])
    }
    R = {
        "argv": sys.argv[1:],
        "spec_source": source,
        "spec": spec,
        "versions": {
            "plast": cfg.get("plast-core", "?"),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "plast_config": f"simd {cfg.get('simd', '?').split()[0]}, openmp {cfg.get('openmp', '?')}",
        "plast_show_config": buf.getvalue(),
        "machine": {"cores": os.cpu_count(), "cpu": _cpu_name(), "platform": platform.platform()},
        "threads": threads,
        "quick": args.quick,
        "results": {},
    }
    micro_text = ""
    for i, sec in enumerate(only):
        t0 = time.time()
        deadline = t_start + TOTAL[q] - sum(RESERVE.get(s, (0, 0))[q] for s in only[i + 1 :])
        log(f"[{sec}]")
        try:
            if sec in TRAIN:
                R["results"].setdefault("train", {})[sec] = bench_train(
                    sec, spec, threads, args.quick, deadline
                )
            elif sec == "gen":
                R["results"]["gen"] = bench_gen(spec, threads, args.quick, deadline)
            elif sec == "rss":
                wls = [w for w in only if w in TRAIN or w == "gen"] or list(TRAIN) + ["gen"]
                R["results"]["rss"] = bench_rss(wls, args.quick, deadline)
            elif sec == "micro":
                R["results"]["micro"], micro_text = bench_micro(args.quick, threads, deadline)
        except Exception as e:  # noqa: BLE001 - report, carry on with the other sections
            import traceback

            err = {"error": f"{type(e).__name__}: {e}"[:1000], "traceback": traceback.format_exc()[-3000:]}
            if sec in TRAIN:
                R["results"].setdefault("train", {})[sec] = err
            else:
                R["results"][sec] = err
            log(traceback.format_exc())
        log(f"[{sec}] {time.time() - t0:.1f} s")
    R["total_seconds"] = time.time() - t_start
    R["micro_text"] = micro_text
    print_report(R)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(R, indent=1, default=str))
        print(f"wrote {out}")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
