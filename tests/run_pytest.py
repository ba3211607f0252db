"""Run pytest on one distribution's tests/ directory, for nox and tox.

    python tests/run_pytest.py packages/plast-nn/tests [pytest arguments...]

A distribution that has no tests yet is not a failure: a missing tests/ directory, or pytest collecting
nothing (exit code 5), prints a note and exits 0. Every other exit code passes through unchanged.
"""

import sys
from pathlib import Path

import pytest

NO_TESTS_COLLECTED = 5


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    tests_dir, args = Path(argv[0]), argv[1:]
    if not tests_dir.is_dir():
        print(f"note: {tests_dir} does not exist yet; no tests to run, counted as a pass")
        return 0
    code = pytest.main([str(tests_dir), *args])
    if code == NO_TESTS_COLLECTED:
        print(f"note: pytest collected no tests in {tests_dir} (exit code 5); counted as a pass")
        return 0
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
