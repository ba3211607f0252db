"""The handle an ``async_op=True`` call returns (torch's Work): the call's MPI requests and what to do once they
are done (AVG divides, all_gather copies into the output list, ...)."""

from ._mpi import mpi


class Work:
    """``wait()`` blocks until the operation is done (raising DistTimeoutError after the group's timeout) and
    returns True; ``is_completed()`` asks without blocking; ``result()`` gives the output tensors.

    Until ``wait()`` returns, MPI may still be reading or writing the tensors' memory: as in torch, read or change
    them only after it (ops recorded on them before the call have already read their old values)."""

    def __init__(self, group, reqs, what, finish=None, outputs=()):
        self._group = group
        self._reqs = list(reqs)
        self._what = what
        self._finish = finish
        self._outputs = list(outputs)
        self._done = False

    def _complete(self):
        if not self._done:
            self._done = True
            if self._finish is not None:
                finish, self._finish = self._finish, None
                finish()

    def is_completed(self):
        if self._done:
            return True
        MPI = mpi()
        if MPI.Request.Testall(self._reqs):
            self._complete()
            return True
        self._group.serve_pings()
        return False

    def wait(self, timeout=None):
        """Block until done; `timeout` (seconds or timedelta) overrides the group's for this wait."""
        if not self._done:
            from_group = None
            if timeout is not None:
                from_group = getattr(timeout, "total_seconds", lambda: timeout)()
            self._group.wait(self._reqs, self._what, from_group)
            self._complete()
        return True

    def is_success(self):
        return self._done

    def result(self):
        return list(self._outputs)

    def __repr__(self):
        return f"<plast.distributed.Work {self._what} {'done' if self._done else 'pending'}>"
