#!/usr/bin/env bash
# The one-call GPU check of plast's CUDA backend (issue 9), for a GPU machine with no network.
#
#   bench/gpu_check.sh --fetch     on a machine with network: put pycuda's sdist and the wheels it needs
#                                  (pure Python, plus siphash24 for CPython 3.12) into $PLAST_GPU_DEPS
#   bench/gpu_check.sh             on the GPU machine: build pycuda from that sdist, install it, plast-core[cuda]
#                                  and plast-nn into the machine's Python (the one with torch; the machine is
#                                  thrown away afterwards), compile the kernels, run the `cuda` tests, time GEMM 4096 against
#                                  torch.matmul, elementwise add against a device-to-device copy, and the gpt
#                                  training step against torch eager; a short table last
#   bench/gpu_check.sh --dry-run   anywhere: what can run without a GPU (tests skip with their reason, the
#                                  kernel bench says why it can't run, the gpt code path runs on the CPU,
#                                  one kernel module compiles with nvcc); the install steps are only printed
#
# The full log and the JSON results go to $OUT (default bench/results/gpu_check/). $PLAST_GPU_DEPS defaults to
# build/gpu_deps/, which git ignores, so it travels to a device machine only when named in `carry`.
# Each stage has its own time limit; the whole run is meant to finish in under 8 minutes on one H200.

set -uo pipefail

MODE=run
for arg in "$@"; do
    case "$arg" in
    --dry-run) MODE=dry ;;
    --fetch) MODE=fetch ;;
    -h | --help)
        sed -n '2,19p' "$0"
        exit 0
        ;;
    *)
        echo "gpu_check.sh: unknown argument $arg (try --help)" >&2
        exit 2
        ;;
    esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${PLAST_GPU_DEPS:-$ROOT/build/gpu_deps}
OUT=${OUT:-$ROOT/bench/results/gpu_check}
PY=${PYTHON:-python3}
NPROC=$(nproc 2>/dev/null || echo 4)
WORK=${PLAST_GPU_WORK:-/tmp/plast-gpu-check}
WHEELS=$WORK/wheels

# pinned so that a carried folder and this script agree (pytools needs siphash24, a compiled wheel: cp312)
PYCUDA=pycuda==2026.1
PURE_WHEELS=(pytools==2026.1.1 platformdirs==4.14.9 mako==1.4.3 "setuptools==80.9.0")
CP312_WHEELS=(siphash24==1.9)

# ---- --fetch: runs where pip can reach its index ---------------------------------------------------------------

if [ "$MODE" = fetch ]; then
    mkdir -p "$DEPS"
    set -e
    "$PY" -m pip download --no-deps --no-binary :all: --no-build-isolation -d "$DEPS" "$PYCUDA"
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
        --platform any -d "$DEPS" "${PURE_WHEELS[@]}"
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$DEPS" "${CP312_WHEELS[@]}"
    ls -l "$DEPS"
    echo "carry it with the run: carry=[\"${DEPS#"$ROOT"/}\"]"
    exit 0
fi

mkdir -p "$OUT" "$WORK"
LOG=$OUT/gpu_check.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
T0=$SECONDS
ROWS=() # "stage|status|seconds|detail"

note() { printf '\n==== %s (t=%ds) ====\n' "$*" "$((SECONDS - T0))"; }
row() { ROWS+=("$1|$2|$3|$4"); }

# stage NAME LIMIT_S CMD...: run CMD under a time limit, record how it went; returns CMD's status
stage() {
    local name=$1 limit=$2
    shift 2
    note "$name"
    local t=$SECONDS rc
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    local took=$((SECONDS - t)) status=ok
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="timeout (${limit}s)"
    elif [ $rc -ne 0 ]; then
        status="failed (rc $rc)"
    fi
    row "$name" "$status" "$took" "${STAGE_DETAIL:-}"
    STAGE_DETAIL=
    return $rc
}

dry() { echo "DRY: would run: $*"; }

echo "plast GPU check, mode=$MODE, repo=$ROOT, out=$OUT, deps=$DEPS, $(date -u +%FT%TZ)"

# ---- the machine ----------------------------------------------------------------------------------------------

note "machine"
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader; then
    HAVE_GPU=1
else
    echo "no NVIDIA GPU visible (nvidia-smi missing or failing)"
fi
"$PY" --version
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2 || echo "nvcc: not on PATH"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available())" ||
    echo "torch: not importable"
"$PY" -c "import setuptools, numpy, Cython; print('setuptools', setuptools.__version__, 'numpy', numpy.__version__, 'Cython', Cython.__version__)" ||
    echo "build tools: missing"
if [ "$MODE" = run ] && [ $HAVE_GPU = 0 ]; then
    echo "gpu_check.sh: no GPU here; use --dry-run on a machine without one" >&2
    exit 2
fi

# ---- pycuda from the carried sdist, and plast into a venv --------------------------------------------------------

SDIST=$(ls "$DEPS"/pycuda-*.tar.gz 2>/dev/null | head -n 1)
note "carried dependencies"
ls -l "$DEPS" 2>/dev/null || echo "missing: $DEPS (run bench/gpu_check.sh --fetch where pip has network)"
if [ -z "$SDIST" ] && [ "$MODE" = run ]; then
    echo "gpu_check.sh: no pycuda sdist under $DEPS; run --fetch first and carry the folder" >&2
    exit 2
fi

build_pycuda() {
    set -e
    rm -rf "$WORK/pycuda-src" && mkdir -p "$WORK/pycuda-src" "$WHEELS"
    tar xzf "$SDIST" -C "$WORK/pycuda-src" --strip-components=1
    cd "$WORK/pycuda-src"
    local cuda_root
    cuda_root=$(dirname "$(dirname "$(command -v nvcc)")")
    "$VPY" configure.py --cuda-root="$cuda_root"
    # build_ext first, in parallel; bdist_wheel then finds every object built
    "$VPY" setup.py -q build_ext -j "$NPROC" bdist_wheel -d "$WHEELS"
    "$VPY" -m pip install -q --no-index --no-deps "$WHEELS"/pycuda-*.whl
    "$VPY" -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
}

install_plast() {
    set -e
    # the cuda extra resolves to the pycuda just built; numpy, safetensors, torch come from the system Python
    "$VPY" -m pip install -q --no-index --find-links "$DEPS" --find-links "$WHEELS" --no-build-isolation \
        -e "$ROOT/packages/plast-core[cuda]" -e "$ROOT/packages/plast-nn"
    "$VPY" -c "import plast; plast.show_config()"
}

install_wheels() {
    set -e
    local w=() f
    for f in "$DEPS"/*.whl; do
        case "$(basename "$f")" in
        setuptools-*) ;;
        *) w+=("$f") ;;
        esac
    done
    "$VPY" -m pip install -q --no-index --no-deps "${w[@]}"
    # plast-core's pyproject needs setuptools 77+ (a license string); carried in case the image's is older
    if ! "$VPY" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)"; then
        "$VPY" -m pip install -q --no-index --no-deps "$DEPS"/setuptools-*.whl
    fi
}

VPY=$PY
if [ "$MODE" = run ]; then
    stage "carried wheels" 120 bash -c "$(declare -f install_wheels); VPY='$VPY' DEPS='$DEPS' install_wheels" || exit 1
    STAGE_DETAIL=$(basename "$SDIST")
    stage "build pycuda (-j $NPROC)" 300 bash -c "$(declare -f build_pycuda); VPY='$VPY' SDIST='$SDIST' WORK='$WORK' WHEELS='$WHEELS' NPROC=$NPROC build_pycuda" || exit 1
    stage "install plast-core[cuda], plast-nn" 300 bash -c "$(declare -f install_plast); VPY='$VPY' DEPS='$DEPS' WHEELS='$WHEELS' ROOT='$ROOT' install_plast" || exit 1
else
    note "install (dry run)"
    dry "pip install --no-index --no-deps $DEPS/*.whl (setuptools only when the image's is older than 77)"
    dry "build pycuda from ${SDIST:-<no sdist>}: configure.py --cuda-root=...; setup.py build_ext -j $NPROC bdist_wheel"
    dry "pip install --no-index --find-links $DEPS --no-build-isolation -e packages/plast-core[cuda] -e packages/plast-nn"
    row "install" "dry run" 0 "printed only"
fi
cd "$ROOT" || exit 1

# ---- kernels: every module compiled for this GPU, in parallel (the loader's disk cache keeps them) --------------

COMPILE_PY='
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
from plast._core import cuda_driver
from plast.kernels.cuda import loader
arch = sys.argv[1] if len(sys.argv) > 1 else cuda_driver.arch()
names = loader.module_names() if len(sys.argv) < 3 else sys.argv[2].split(",")
t = time.perf_counter()
with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as ex:
    sizes = list(ex.map(lambda n: len(loader.compile_module(n, arch)), names))
print(f"compiled {len(names)} module(s) for {arch} in {time.perf_counter() - t:.1f} s:",
      ", ".join(f"{n} {s // 1024} KiB" for n, s in zip(names, sizes)))
'
if [ "$MODE" = run ]; then
    stage "compile kernels" 240 "$VPY" -c "$COMPILE_PY"
elif command -v nvcc >/dev/null 2>&1; then
    STAGE_DETAIL="one module, sm_90, here"
    stage "compile kernels" 240 "$VPY" -c "$COMPILE_PY" sm_90 elementwise
else
    row "compile kernels" "skipped" 0 "no nvcc here"
fi

# ---- the cuda-marked tests ----------------------------------------------------------------------------------------

TESTS=(packages/plast-core/tests)
[ "$MODE" = dry ] && TESTS=(packages/plast-core/tests/test_cuda.py packages/plast-core/tests/test_cuda_wiring.py)
stage "pytest -m cuda" 240 bash -c "
    '$VPY' -m pytest ${TESTS[*]} -m cuda -q -rfEs -p no:cacheprovider >'$OUT/pytest_cuda.log' 2>&1
    rc=\$?
    tail -n 25 '$OUT/pytest_cuda.log'
    exit \$rc"
ROWS[-1]="${ROWS[-1]}$(tail -n 1 "$OUT/pytest_cuda.log" 2>/dev/null | tr '|' '/')" # the pytest summary

# ---- kernel timings: GEMM 4096 vs torch.matmul, add vs a device-to-device copy, softmax, layer_norm, AdamW ----

[ "$MODE" = dry ] && STAGE_DETAIL="no GPU: it only says why"
stage "kernel timings" 180 "$VPY" "$ROOT/bench/gpu_check.py" --no-tests --out "$OUT"

# ---- the gpt workload (DESIGN §6): one training step, plast eager vs torch eager ----------------------------------

GPT_PY='
import json, os, sys, time
root, dev, steps, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, os.path.join(root, "bench"))
import torch
import plast
import run as R
import workloads_plast as wp
import workloads_torch as wt

spec, source = R.load_spec()
w = R.workload_spec(spec, "gpt")
res = {"device": dev, "spec_source": source, "steps": steps,
       "shape": {k: w[k] for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "batch")}}

def timed(step, sync):
    losses = [step(read=True) for _ in range(warm)]
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) / steps * 1e3, losses

tw = wt.build_train("gpt", w)
state, data = tw.state()
if dev == "cuda":
    tw.model.to("cuda")
    tw.x, tw.y = tw.x.cuda(), tw.y.cuda()
    torch.set_default_device("cuda")  # the workload makes its positions with a bare torch.arange
    tsync = torch.cuda.synchronize
else:
    tsync = lambda: None
ms, losses = timed(tw.step, tsync)
torch.set_default_device("cpu")
res["torch"] = {"status": "ok", "ms": ms, "losses": losses}

try:
    from plast.nn.parameter import _rebind
    model = wp.gpt_model(w)
    wp._load(model, state)
    if dev != "cpu":
        with plast.no_grad():
            for p in model.parameters():
                _rebind(p, p.detach().to(dev))
            for m in model.modules():
                for name, b in list(m._buffers.items()):
                    if b is not None:
                        m._buffers[name] = b.to(dev)
    o = w["optim"]
    opt = wp._optimizer("AdamW")(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                                 weight_decay=o["weight_decay"])
    x, y = (plast.tensor(a, device=dev) for a in data)
    pw = wp.TrainWorkload(model, opt, wp._gpt_loss, x, y, jit=False)
    # plast has no default device yet: the workload makes its positions with a bare plast.arange
    arange = plast.arange
    plast.arange = lambda *a, **k: arange(*a, **{"device": dev, **k})
    try:
        ms, losses = timed(pw.step, plast.cuda.synchronize if dev == "cuda" else (lambda: None))
    finally:
        plast.arange = arange
    agree = all(abs(a - b) <= 1e-3 * max(1.0, abs(b)) for a, b in zip(losses, res["torch"]["losses"]))
    res["plast"] = {"status": "ok", "ms": ms, "losses": losses, "loss_agrees": agree}
except Exception as e:  # a plast failure is a result of the check, not a reason to stop it
    import traceback
    traceback.print_exc()
    res["plast"] = {"status": f"failed: {type(e).__name__}: {e}"[:300]}
print(json.dumps(res, indent=1))
with open(os.path.join(os.environ["OUT"], "gpt.json"), "w") as f:
    json.dump(res, f, indent=1)
'
export OUT
if [ "$MODE" = run ]; then
    stage "gpt training step" 180 "$VPY" -c "$GPT_PY" "$ROOT" cuda 20 3
else
    STAGE_DETAIL="on the CPU, 2 steps: the code path only"
    stage "gpt training step" 180 "$VPY" -c "$GPT_PY" "$ROOT" cpu 2 1
fi

# ---- the short table -------------------------------------------------------------------------------------------

note "summary"
printf '%s\n' "${ROWS[@]}" >"$OUT/stages.txt"
"$VPY" - "$OUT" "$((SECONDS - T0))" "$MODE" <<'EOF'
import json, os, sys
out, total, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"\nplast GPU check ({mode}), {total} s; full log: {os.path.join(out, 'gpu_check.log')}")
print(f"\n{'stage':34s} {'status':18s} {'s':>5s}  detail")
for line in open(os.path.join(out, "stages.txt")):
    name, status, secs, detail = (line.rstrip("\n").split("|", 3) + ["", "", "", ""])[:4]
    print(f"{name:34s} {status:18s} {secs:>5s}  {detail}")

rows = []
try:
    bench = json.load(open(os.path.join(out, "gpu_check.json")))["bench"]
    for b in bench:
        rows.append((b["name"], b["plast_ms"], b["torch_ms"], f"{b['figure']:.1f} {b['unit']}"))
except (OSError, KeyError, ValueError):
    rows.append(("kernel timings", None, None, "not run (no GPU or failed: see the log)"))
try:
    g = json.load(open(os.path.join(out, "gpt.json")))
    p, t = g.get("plast", {}), g.get("torch", {})
    if p.get("status") == "ok":
        rows.append((f"gpt step ({g['device']})", p["ms"], t["ms"], "loss " + ("ok" if p["loss_agrees"] else "DIFF")))
    else:
        rows.append((f"gpt step ({g['device']})", None, t.get("ms"), p.get("status", "?")[:60]))
except (OSError, ValueError):
    rows.append(("gpt step", None, None, "not run: see the log"))
fmt = lambda v: f"{v:10.3f}" if isinstance(v, (int, float)) else f"{'-':>10s}"
print(f"\n{'measurement':40s} {'plast ms':>10s} {'torch ms':>10s} {'ratio':>7s}  figure")
for name, p, t, fig in rows:
    ratio = f"{p / t:7.2f}" if isinstance(p, (int, float)) and t else f"{'-':>7s}"
    print(f"{name:40s} {fmt(p)} {fmt(t)} {ratio}  {fig}")
print("\nthe `torch ms` of 'add' is a device-to-device copy of the same bytes; targets (H200): GEMM fp32 >= 60% of"
      " cuBLAS, add >= 80% of copy bandwidth, gpt step <= 1.0x torch eager")
EOF

# the exit status: 0 when every stage went through (a timing being slow is a result, not a failure)
for r in "${ROWS[@]}"; do
    case "$(echo "$r" | cut -d'|' -f2)" in
    ok | "dry run" | skipped) ;;
    *) exit 1 ;;
    esac
done
exit 0
