"""plast.distributed's errors (torch.distributed's names), all under plast's PlastError."""

from .._core.errors import PlastError


class DistError(PlastError, RuntimeError):
    """Something went wrong in plast.distributed."""


class DistBackendError(DistError):
    """MPI reported an error (the message is MPI's, with the call that got it)."""


class DistTimeoutError(DistBackendError):
    """A collective or a send/recv did not finish within the process group's timeout: a peer is dead, hung, or
    called a different collective. The message names the ranks that did not answer."""


def from_mpi(e, what):
    """The DistBackendError for an MPI exception `e` raised by the call `what`."""
    return DistBackendError(f"{what}: MPI error: {e}")
