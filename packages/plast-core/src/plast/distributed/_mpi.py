"""The one place that imports mpi4py: on the first call that needs MPI, never at ``import plast`` (the `mpi` extra
is optional, and MPI_Init is a side effect a program that never communicates must not pay for)."""

import importlib.util

_MPI = None


def available():
    """Whether mpi4py is installed (without importing it, so without starting MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


def mpi():
    """mpi4py's MPI module (importing it initializes MPI, or joins the ranks that ``mpiexec`` started)."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py
        except ImportError:
            raise ImportError(
                "plast.distributed needs mpi4py and an MPI library: install plast-core's `mpi` extra "
                '(pip install "./packages/plast-core[mpi]", which brings mpi4py and mpich)'
            ) from None
        # NOTE: mpi4py would otherwise ask MPI for MPI_THREAD_MULTIPLE; plast calls MPI from one thread only, and
        # the cheaper level keeps MPICH's progress engine free of locks.
        mpi4py.rc.thread_level = "serialized"
        from mpi4py import MPI

        _MPI = MPI
    return _MPI
