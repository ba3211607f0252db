"""``python -m plast.torch SCRIPT [args...]`` (or ``-m MODULE [args...]``): run a PyTorch program on plast."""

import os
import runpy
import sys

from plast.torch import install

USAGE = "usage: python -m plast.torch SCRIPT [args...]  |  python -m plast.torch -m MODULE [args...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        raise SystemExit(0 if argv else 2)
    if argv[0] != "-m":
        # as `python SCRIPT` does: the script's directory first on sys.path (in place of this package's); set
        # before install(), which puts its own directory in front for spawned processes
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(USAGE)
        sys.argv = [argv[1], *argv[2:]]  # run_module puts the module's path in argv[0], as python -m does
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return

    script = argv[0]
    sys.argv = list(argv)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
