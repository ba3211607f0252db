"""Check one installed subset of the plast distributions (run by `nox -s subsets` in a fresh virtualenv).

    python tests/subsets/check_subset.py --installed core,nn --editable nn

Asserts that exactly the named plast distributions are installed (and no unrelated `plast` from an index),
that `import plast` works, that every installed subpackage imports both as `import plast.nn` and as the
attribute `plast.nn`, from the expected place (the repo's src/ for editable installs, site-packages
otherwise), and that every missing one fails with an ImportError naming the distribution to install.
Each check runs in a fresh interpreter, so one import never hides another.
"""

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DISTS = {"core": "plast-core", "nn": "plast-nn", "data": "plast-data", "experiment": "plast-experiment"}
# subpackage -> the short name of the distribution that ships it
SUBPACKAGES = {"nn": "nn", "optim": "nn", "data": "data", "experiment": "experiment"}

# Each probe prints one JSON object: {"ok": bool, "error": type name, "message": str, "file": path}
PROBE = """
import json, sys
out = {"ok": True, "error": None, "message": "", "file": None}
try:
    mod = None
    exec(sys.argv[1])
    out["file"] = getattr(mod, "__file__", None) or str(list(getattr(mod, "__path__", [])))
except BaseException as e:
    out.update(ok=False, error=type(e).__name__, message=str(e), is_import_error=isinstance(e, ImportError))
print(json.dumps(out))
"""

FORMS = {
    "import statement": "import plast.{sub}; mod = plast.{sub}",
    "attribute access": "import plast; mod = plast.{sub}",
    "from-import": "from plast import {sub} as mod",
}


def probe(code: str) -> dict:
    # -I: no cwd, user site or PYTHON* variables on the path; only what is installed in this environment
    res = subprocess.run([sys.executable, "-I", "-c", PROBE, code], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        return {"ok": False, "error": "crash", "message": (res.stderr or res.stdout).strip()[-2000:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def where_ok(path: str | None, short: str, editable: bool) -> bool:
    if not path:
        return False
    inside_src = (REPO / "packages" / DISTS[short] / "src").as_posix() in Path(path).as_posix()
    return inside_src if editable else ("site-packages" in path and not inside_src)


def installed_distributions() -> set[str]:
    from importlib.metadata import distributions

    return {
        d.metadata["Name"].lower() for d in distributions() if d.metadata["Name"].lower().startswith("plast")
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--installed", required=True, help="comma-separated short names: core,nn,data,experiment")
    ap.add_argument("--editable", default="", help="those of --installed that are editable installs")
    opts = ap.parse_args()
    installed = [s for s in opts.installed.split(",") if s]
    editable = {s for s in opts.editable.split(",") if s}
    unknown = (set(installed) | editable) - set(DISTS)
    if unknown or "core" not in installed or not editable <= set(installed):
        ap.error(f"bad subset: installed={installed} editable={sorted(editable)}")

    checks: list[tuple[str, bool, str]] = []  # (what, passed, detail)
    expected = {DISTS[s] for s in installed}
    found = installed_distributions()
    checks.append(
        ("installed distributions", found == expected, f"expected {sorted(expected)}, found {sorted(found)}")
    )

    jobs = {"import plast": ("mod = __import__('plast')", "core")}
    for sub, short in SUBPACKAGES.items():
        for form, code in FORMS.items():
            jobs[f"{form} plast.{sub}"] = (code.format(sub=sub), short)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(jobs, pool.map(probe, [code for code, _ in jobs.values()])))

    for what, (_, short) in jobs.items():
        res, dist = results[what], DISTS[short]
        if short in installed:
            ok = res["ok"] and where_ok(res.get("file"), short, short in editable)
            mode = "editable, from the repo" if short in editable else "regular, from site-packages"
            detail = (
                f"expected it to import ({mode}); got {res.get('error') or 'file ' + str(res.get('file'))}"
            )
            if res.get("message"):
                detail += f": {res['message']}"
        else:
            # a missing sibling: an ImportError (ModuleNotFoundError for the import statement) naming it
            if what.startswith("import statement"):
                need, type_ok = "ModuleNotFoundError", res.get("error") == "ModuleNotFoundError"
            else:
                need, type_ok = "an ImportError", res.get("is_import_error", False)
            ok = not res["ok"] and type_ok and dist in res.get("message", "")
            detail = (
                f"expected {need} naming {dist}; got {res.get('error') or 'a module'}: {res.get('message')}"
            )
        checks.append((what, ok, detail))

    label = ", ".join(DISTS[s] + (" (editable)" if s in editable else "") for s in installed)
    print(f"subset: {label}")
    for what, ok, detail in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f"\n         {detail}"))
    failed = sum(not ok for _, ok, _ in checks)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
