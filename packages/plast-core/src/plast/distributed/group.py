"""A process group over an MPI communicator, and waiting on it with a deadline.

Every request plast.distributed starts is non-blocking; ``ProcessGroup.wait`` polls it against the group's
deadline (default 60 s, ``timeout=`` of init_process_group / new_group, or ``PLAST_DIST_TIMEOUT`` in seconds).
While it polls it also answers other ranks' pings on a second communicator, so when a wait times out the rank
asks every peer whether it is alive and which collective it is in, and the error names the ones that did not
answer or disagree. A group that timed out is broken: the process aborts the MPI job when it exits (world.py),
so no rank is left waiting for a peer that will never come.
"""

import time

import numpy as np

from ._mpi import mpi
from .errors import DistBackendError, DistError, DistTimeoutError

_PING, _PONG = 1, 2
_PING_GRACE_S = 3.0  # at most this much of a timeout goes to asking the peers "are you alive?"


class ProcessGroup:
    """A set of ranks that communicate together (torch's ProcessGroup): an MPI communicator, the global ranks it
    holds in its order, and its timeout. Ranks outside a subgroup hold one whose ``comm`` is None."""

    def __init__(self, comm, ranks, timeout_s):
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout_s = timeout_s
        self.seq = (
            0  # collectives started on this group: the ping answer, to tell a peer in another collective
        )
        # NOTE: pings travel on a duplicate of the communicator, so they never match a collective's messages
        self.diag = comm.Dup() if comm is not None else None
        self.broken = None  # the error that broke this group (a timed-out request stays pending in MPI)

    def rank(self):
        return self.comm.Get_rank() if self.comm is not None else -1

    def size(self):
        return len(self.ranks)

    def group_rank(self, global_rank, what):
        """The rank inside this group of a global rank (torch's src/dst arguments are global ranks)."""
        if global_rank not in self.ranks:
            raise ValueError(f"{what}: rank {global_rank} is not in this process group (ranks {self.ranks})")
        return self.ranks.index(global_rank)

    def __repr__(self):
        return f"<plast.distributed.ProcessGroup ranks={self.ranks} timeout={self.timeout_s}s>"

    # ---- waiting with a deadline ----
    def check_usable(self, what):
        if self.broken is not None:
            raise DistError(
                f"{what}: this process group is unusable after an earlier error ({self.broken}); "
                "restart the job (the last checkpoint is intact)"
            )

    def wait(self, reqs, what, timeout_s=None, statuses=None):
        """Wait for the MPI requests `reqs` (filling `statuses`), polling them against the deadline; raise
        DistTimeoutError naming the peers that did not answer when it passes."""
        total = self.timeout_s if timeout_s is None else timeout_s
        # the last part of the timeout is for asking the peers what became of them (_timed_out)
        deadline = time.monotonic() + total - min(_PING_GRACE_S, total / 4)
        spins = 0
        while not self._test(reqs, what, statuses):
            spins += 1
            if spins < 64:
                continue  # a collective between ranks of one machine usually ends within microseconds
            now = time.monotonic()
            if now > deadline:
                self._timed_out(what, total)
            if spins % 64 == 0:
                self.serve_pings()
            # NOTE: sleeping lets the peer rank use this core (2 ranks on 2 cores): spinning would slow it down
            time.sleep(min(1e-3, 1e-6 * (spins - 63)))

    @staticmethod
    def _test(reqs, what, statuses):
        MPI = mpi()
        try:
            return MPI.Request.Testall(reqs, statuses)
        except MPI.Exception as e:
            code = e.Get_error_code()
            if e.Get_error_class() == MPI.ERR_IN_STATUS and statuses:
                code = next((s.Get_error() for s in statuses if s.Get_error() != MPI.SUCCESS), code)
            raise DistBackendError(f"{what}: MPI error: {MPI.Get_error_string(code)}") from None

    def serve_pings(self):
        """Answer the peers that asked whether this rank is alive (see _timed_out)."""
        if self.diag is None:
            return
        MPI = mpi()
        status = MPI.Status()
        while self.diag.Iprobe(source=MPI.ANY_SOURCE, tag=_PING, status=status):
            src = status.Get_source()
            buf = np.empty(1, np.int64)
            self.diag.Recv(buf, source=src, tag=_PING)
            # small messages leave eagerly: this send does not wait for the peer
            self.diag.Send(np.array([self.seq], np.int64), dest=src, tag=_PONG)

    def _timed_out(self, what, total):
        MPI = mpi()
        me = self.rank()
        peers = [r for r in range(self.size()) if r != me]
        out = np.array([self.seq], np.int64)
        answers = {r: np.full(1, -1, np.int64) for r in peers}
        # NOTE: MPI may report an error for a peer that is gone; that peer then simply does not answer
        reqs = []
        for r in peers:
            try:
                reqs.append(self.diag.Isend(out, dest=r, tag=_PING))
                reqs.append(self.diag.Irecv(answers[r], source=r, tag=_PONG))
            except MPI.Exception:
                pass
        end = time.monotonic() + min(_PING_GRACE_S, total / 4)
        while time.monotonic() < end:
            try:
                self.serve_pings()
                if MPI.Request.Testsome(reqs) is None or all(a[0] >= 0 for a in answers.values()):
                    break
            except MPI.Exception:
                pass
            time.sleep(1e-3)
        silent = [self.ranks[r] for r in peers if answers[r][0] < 0]
        elsewhere = [
            f"rank {self.ranks[r]} is in collective #{answers[r][0]}"
            for r in peers
            if answers[r][0] >= 0 and answers[r][0] != self.seq
        ]
        parts = []
        if silent:
            names = ", ".join(map(str, silent))
            parts.append(
                f"rank{'s' if len(silent) > 1 else ''} {names} did not answer (dead, hung, or busy outside "
                "plast.distributed)"
            )
        if elsewhere:
            parts.append(f"this rank is in collective #{self.seq}, " + ", ".join(elsewhere))
        if not parts:
            parts.append("every peer answered and is in the same collective: MPI made no progress")
        msg = (
            f"{what} on rank {self.ranks[me]} timed out after {total:g} s: {'; '.join(parts)}. "
            "Raise the timeout with init_process_group(timeout=...) or PLAST_DIST_TIMEOUT if the peers are slow; "
            "this process aborts the MPI job when it exits"
        )
        self.broken = msg
        raise DistTimeoutError(msg)

    def free(self):
        for c in (self.diag, self.comm):
            if c is not None and c != mpi().COMM_WORLD:
                try:
                    c.Free()
                except Exception:  # noqa: BLE001 -- a broken communicator may refuse; it dies with the process
                    pass
        self.comm = self.diag = None
