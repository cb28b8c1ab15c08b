"""StepStream: pipelined StreamSteps with acks, surviving server restarts.

Updates are numbered by the stream (continuing the Job's seqs) and kept until acknowledged.
When the stream breaks with a retryable code, the next read opens a new one after a backoff
and resends the unacknowledged updates with their original seqs; the server answers an
already admitted seq with its original ack (duplicate=True), so nothing is charged twice.

Refusals and per-update errors are data here: an ack with admitted=False (``refused``) or a
non-zero ``error_code``. A refused update consumes no seq, so updates pipelined behind it
are not admitted either (refused as following a refusal, or FAILED_PRECONDITION gaps); the
stream rewinds its numbering once per refusal, so the next send() reuses the refused seq.

Use from one thread:

    with job.stream() as s:
        for _ in range(1000):
            s.send(SubsampledGaussian(sigma=1.0, q=1e-3))
        for ack in s.acks():        # in send order
            ...
"""
import collections
import queue
from typing import Deque, Iterator, List, Optional, Sequence, Tuple

import grpc

from . import errors
from ._generated import dpledger_pb2 as pb
from .mechanisms import MechanismLike, Step, to_step
from .results import StepAck

_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class StepStream:
    """See the module docstring. ``window``: most updates in flight; send() reads acks
    ahead (kept for recv) rather than let flow control stall."""

    def __init__(self, job, *, window: int = 256):
        if window < 1:
            raise errors.InvalidArgument(f"window must be >= 1, got {window}")
        self.job = job
        self.window = window
        self.reconnects = 0
        self._next_seq = job.last_seq + 1
        self._epoch = 0  # bumped by each rewind; older acks do not rewind again
        self._pending: Deque[Tuple[pb.StepUpdate, int]] = collections.deque()
        self._ready: Deque[StepAck] = collections.deque()
        self._failures = 0
        self._call = None
        self._queue: Optional[queue.Queue] = None
        self._closed = False

    # -- connection ------------------------------------------------------------------

    def _open(self) -> None:
        requests: queue.Queue = queue.Queue()

        def generate():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item
        ledger = self.job.ledger
        self._queue = requests
        self._call = ledger._stub.StreamSteps(generate(), metadata=ledger._metadata)
        for update, _ in self._pending:
            requests.put(self._request(update))

    def _drop(self) -> None:
        if self._call is not None:
            self._queue.put(None)
            self._call.cancel()
            self._call = None

    def _request(self, update: pb.StepUpdate) -> pb.StreamStepsRequest:
        return pb.StreamStepsRequest(job_id=self.job.job_id, tenant=self.job.tenant,
                                     update=update)

    # -- updates and acks ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def send(self, mechanism: MechanismLike, count: int = 1) -> int:
        """Sends one update of ``count`` applications of ``mechanism``; returns its seq."""
        return self.send_update([Step(mechanism, count)])

    def send_update(self, steps: Sequence, *, seq: Optional[int] = None) -> int:
        """Sends one update of several steps (``seq``: an explicit seq, e.g. a retry)."""
        if self._closed:
            raise errors.FailedPrecondition("the stream is closed")
        while len(self._pending) >= self.window:
            self._ready.append(self._read())
        if seq is None:
            seq = self._next_seq
            self._next_seq += 1
        update = pb.StepUpdate(seq=seq, steps=[to_step(s).to_proto() for s in steps])
        self._pending.append((update, self._epoch))
        if self._call is None:
            self._open()  # resends every pending update, this one included
        else:
            self._queue.put(self._request(update))
        return seq

    def recv(self) -> StepAck:
        """The ack of the oldest unacknowledged update (in send order)."""
        if self._ready:
            return self._ready.popleft()
        if not self._pending:
            raise errors.FailedPrecondition("no update in flight")
        return self._read()

    def acks(self) -> Iterator[StepAck]:
        """Acks of every update sent so far, in order, until none is in flight."""
        while self._ready or self._pending:
            yield self.recv()

    def _read(self) -> StepAck:
        policy = self.job.ledger.retry
        while True:
            if self._call is None:
                self._open()
            retryable = False
            try:
                proto = next(self._call)
            except StopIteration:
                error = errors.Internal("the server ended the stream with updates unacknowledged")
            except grpc.RpcError as e:
                retryable = e.code() in _RETRYABLE
                error = errors.from_rpc_error(e)
            else:
                if not proto.stream_end:
                    break
                # The server is ending this stream (idle, shutting down): it acknowledges
                # nothing; reconnect and resend as after a broken stream.
                retryable = True
                error = errors.from_code_number(proto.error_code, proto.error_message)
            if retryable and self._failures + 1 < policy.max_attempts:
                self._failures += 1
                self.reconnects += 1
                self._drop()
                self.job.ledger._backoff(self._failures + 1)
                continue
            self._drop()
            raise error
        self._failures = 0
        _, epoch = self._pending.popleft()
        ack = StepAck.from_proto(proto)
        if ack.admitted:
            self.job._admitted(ack.last_seq)
        elif epoch == self._epoch:
            # The first refusal or error of this epoch: later updates of the epoch will be
            # gaps; new ones continue from the refused seq.
            self._next_seq = min(self._next_seq, ack.seq)
            self._epoch += 1
        return ack

    def close(self) -> List[StepAck]:
        """Half-closes the stream and returns the acks not yet read."""
        if self._closed:
            return []
        rest = list(self.acks())
        self._closed = True
        self._drop()
        return rest

    def __enter__(self) -> "StepStream":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self._closed = True
            self._drop()
