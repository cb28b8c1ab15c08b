"""Ledger (a connection) and Job (one job's handle): an idiomatic API over every RPC of
dpledger.v1.Ledger (proto/dpledger.proto).

Retries (the model is the C++ client, client/client.h). UNAVAILABLE and DEADLINE_EXCEEDED
are retried with exponential backoff; every retry resends the very same request, so the
server's idempotency makes it safe: a step update is keyed by its sequence number (a retry
of an admitted seq returns the original ack with duplicate=True and charges nothing), a
release by its request_id (filled in when the caller leaves it empty). CreateJob and
CloseJob are made idempotent here: a retry that meets ALREADY_EXISTS / a closed job reads
the job back and accepts it when it is the one asked for.

Sequence numbers (README "API"): they start at 1 and are contiguous per job. A Job starts
from the server's last_seq and numbers its updates itself; a refused update consumes no
seq. One writer per job: a second writer's updates make this one's seqs stale (ALREADY_EXISTS
or FAILED_PRECONDITION); :meth:`Job.refresh` resynchronises.
"""
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from . import errors
from ._generated import dpledger_pb2 as pb
from ._generated import dpledger_pb2_grpc as pb_grpc
from .mechanisms import MechanismLike, Step, to_step
from .results import Bound, JobInfo, LedgerEntry, Release, Remaining, Spent, StepAck

if TYPE_CHECKING:
    from .stream import StepStream

StepLike = Union[Step, MechanismLike]
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_SCHEDULE = {None: pb.SCHEDULE_UNSPECIFIED, "declared": pb.SCHEDULE_DECLARED,
             "adaptive": pb.SCHEDULE_ADAPTIVE}
_NEIGHBOURING = {None: pb.NEIGHBOURING_RELATION_UNSPECIFIED,
                 "add_remove": pb.NEIGHBOURING_RELATION_ADD_REMOVE,
                 "replace_one": pb.NEIGHBOURING_RELATION_REPLACE_ONE}


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of one call: ``max_attempts`` tries in all (1: no retry), waits growing from
    ``initial_backoff`` by ``multiplier`` up to ``max_backoff`` seconds, with jitter."""
    max_attempts: int = 10
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    multiplier: float = 2.0

    def delay(self, next_attempt: int) -> float:
        """Seconds to wait before attempt ``next_attempt`` (2, 3, ...)."""
        wait = self.initial_backoff * self.multiplier ** max(0, next_attempt - 2)
        # Jitter only spreads the retries of many clients apart.
        return min(wait, self.max_backoff) * random.uniform(0.5, 1.0)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class Ledger:
    """A connection to dpledgerd. Thread-safe; use as a context manager or call close().

    Args:
      target: "host:port".
      tls: False (plaintext, for servers run with --insecure), True (TLS with the system
        roots), a path to a PEM CA file, or the PEM bytes.
      token: bearer token (sent as "authorization: Bearer ..."); token_file: a file whose
        first line is the token.
      tenant: put in requests; empty: the token's tenant.
      server_name: the name checked in the server's certificate instead of the host.
      timeout: deadline of one unary attempt, seconds.
      retry: the RetryPolicy of every call.
      interceptors: gRPC client interceptors (tracing, tests that lose replies).

    Unset settings come from the environment as for the C++ client: DPLEDGER_CLIENT_TOKEN,
    DPLEDGER_CLIENT_TOKEN_FILE, DPLEDGER_CLIENT_TENANT, DPLEDGER_CLIENT_TLS_CA (implies TLS),
    DPLEDGER_CLIENT_TLS_SERVER_NAME.
    """

    def __init__(self, target: str, *, tls: Union[bool, str, bytes, None] = None,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 tenant: Optional[str] = None, server_name: Optional[str] = None,
                 timeout: float = 30.0, retry: RetryPolicy = RetryPolicy(),
                 interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = ()):
        if not target:
            raise errors.InvalidArgument("target must be HOST:PORT, got an empty string")
        if retry.max_attempts < 1:
            raise errors.InvalidArgument(
                f"retry.max_attempts must be >= 1, got {retry.max_attempts}")
        env = os.environ.get
        token_file = token_file or env("DPLEDGER_CLIENT_TOKEN_FILE")
        if token is None and token_file:
            lines = _read(token_file).decode().splitlines()
            token = lines[0].strip() if lines else ""
        self.token = token if token is not None else env("DPLEDGER_CLIENT_TOKEN", "")
        self.tenant = tenant if tenant is not None else env("DPLEDGER_CLIENT_TENANT", "")
        if tls is None:
            tls = env("DPLEDGER_CLIENT_TLS_CA") or False
        server_name = server_name or env("DPLEDGER_CLIENT_TLS_SERVER_NAME")
        self.target = target
        self.timeout = timeout
        self.retry = retry
        # Reconnect promptly after a server restart (gRPC's default backoff reaches 120 s);
        # our own backoff paces the retries.
        options = [("grpc.max_receive_message_length", 64 << 20),
                   ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.dns_min_time_between_resolutions_ms", 200)]
        if tls is False:
            channel = grpc.insecure_channel(target, options=options)
        else:
            roots = None if tls is True else tls if isinstance(tls, bytes) else _read(tls)
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(roots), options)
        self._raw_channel = channel
        self._channel = grpc.intercept_channel(channel, *interceptors) if interceptors else channel
        self._stub = pb_grpc.LedgerStub(self._channel)
        # Metadata rather than call credentials: gRPC refuses those on plaintext channels,
        # and tokens are used over plaintext in tests.
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {self.token}"),) if self.token else ())

    # -- connection ------------------------------------------------------------------

    def close(self) -> None:
        self._raw_channel.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def health(self, service: str = "", timeout: float = 5.0) -> bool:
        """grpc.health.v1.Health/Check: True when the server says SERVING. Not retried.
        The two one-field messages are hand-encoded (Debian ships no health stubs)."""
        if len(service.encode()) >= 128:  # one length byte below
            raise errors.InvalidArgument(f"service name too long: {service!r}")
        check = self._channel.unary_unary("/grpc.health.v1.Health/Check")
        request = b"\x0a" + bytes([len(service)]) + service.encode() if service else b""
        try:
            response = check(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError:
            return False
        return response[:2] == b"\x08\x01"

    def wait_ready(self, timeout: float) -> bool:
        """Waits until the server answers SERVING or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health(timeout=min(1.0, max(0.05, deadline - time.monotonic()))):
                return True
            self._wait_connected(min(0.1, max(0.0, deadline - time.monotonic())))
        return False

    def _wait_connected(self, seconds: float) -> None:
        """Waits ``seconds``, watching the channel meanwhile: a reconnection makes progress only
        while something watches it (otherwise only gRPC's 5 s backup poller drives it), so a
        plain sleep would leave a restarted server unreached for seconds (as client.cc)."""
        until = time.monotonic() + seconds
        ready = grpc.channel_ready_future(self._raw_channel)
        try:
            ready.result(timeout=seconds)
        except grpc.FutureTimeoutError:
            pass
        finally:
            ready.cancel()
        rest = until - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    def _backoff(self, next_attempt: int) -> None:
        """The retry policy's wait before attempt ``next_attempt``."""
        self._wait_connected(self.retry.delay(next_attempt))

    def _call(self, method: str, request, *, on_retry_error: Optional[Callable] = None):
        """One unary RPC with retries; gRPC errors become DpledgerError subclasses.
        ``on_retry_error(error)`` may turn an error met after a retry into a result."""
        rpc = getattr(self._stub, method)
        for attempt in range(1, self.retry.max_attempts + 1):
            if attempt > 1:
                self._backoff(attempt)
            try:
                return rpc(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                if e.code() in _RETRYABLE and attempt < self.retry.max_attempts:
                    continue
                error = errors.from_rpc_error(e)
                if attempt > 1 and on_retry_error is not None:
                    result = on_retry_error(error)
                    if result is not None:
                        return result
                raise error from None
        raise AssertionError("unreachable")

    def _tenant(self, tenant: Optional[str]) -> str:
        return self.tenant if tenant is None else tenant

    # -- jobs ------------------------------------------------------------------------

    def create_job(self, job_id: str, *, epsilon: float, delta: float,
                   schedule: Optional[str] = None, plan: Sequence[StepLike] = (),
                   filter: Optional[str] = None, rdp_order: Optional[float] = None,
                   expected_step: Optional[MechanismLike] = None,
                   accountant: Optional[str] = None, neighbouring: Optional[str] = None,
                   mc_seed: Optional[int] = None, mc_samples: Optional[int] = None,
                   tenant: Optional[str] = None) -> "Job":
        """Creates a job with budget (epsilon nats, delta) and returns its handle.

        How its mechanisms are chosen (README "Adaptive or declared?"):
          schedule="declared" (the default): fixed in advance, ``plan`` the ordered steps
            (each with its count); no plan: the first admitted mechanism, repeated. Steps off
            the plan are refused (:class:`dpledger.PlanViolation`). Admission: the natural
            filter of ``accountant`` ("pld" when None: the server's default; "rdp",
            "analytic", "spa", "edgeworth", or "evr").
          schedule="adaptive": chosen at run time from earlier results; ``filter`` "renyi"
            (default; order ``rdp_order``, or chosen for ``expected_step``) or "gdp"
            (Gaussians only); ``accountant`` must be None.
        neighbouring: "add_remove" (default) or "replace_one"; mc_seed / mc_samples: Monte
        Carlo options. Raises AlreadyExists when the job exists (see :meth:`open_job`).
        New CreateJobRequest fields get a keyword here, with a default.
        """
        if schedule not in _SCHEDULE:
            raise errors.InvalidArgument(
                f"schedule must be 'declared' or 'adaptive', got {schedule!r}")
        if neighbouring not in _NEIGHBOURING:
            raise errors.InvalidArgument(
                f"neighbouring must be 'add_remove' or 'replace_one', got {neighbouring!r}")
        request = pb.CreateJobRequest(
            job_id=job_id, tenant=self._tenant(tenant),
            budget=pb.Budget(epsilon=epsilon, delta=delta),
            neighbouring=_NEIGHBOURING[neighbouring], accountant=accountant or "",
            mc=pb.McOptions(seed=mc_seed or 0, num_samples=mc_samples or 0),
            schedule=_SCHEDULE[schedule], plan=[to_step(s).to_proto() for s in plan],
            filter=filter or "", rdp_order=rdp_order or 0.0)
        if expected_step is not None:
            request.expected_step.CopyFrom(to_step(expected_step).to_proto())
        return Job(self, JobInfo.from_proto(self._call(
            "CreateJob", request, on_retry_error=lambda e: self._created_earlier(e, request))))

    def _created_earlier(self, error: errors.DpledgerError, request: pb.CreateJobRequest):
        # An earlier attempt may have created the job before its answer was lost.
        if not isinstance(error, errors.AlreadyExists):
            return None
        job = self._call("GetJob", pb.GetJobRequest(job_id=request.job_id, tenant=request.tenant))
        want_accountant = request.accountant or job.accountant
        want_schedule = request.schedule or pb.SCHEDULE_DECLARED
        if (job.budget == request.budget and job.accountant == want_accountant
                and job.schedule == want_schedule and job.num_updates == 0):
            return job
        return None

    def open_job(self, job_id: str, *, epsilon: float, delta: float,
                 tenant: Optional[str] = None, **create_args) -> "Job":
        """Creates the job, or attaches to it when it exists with this budget (re-runs of a
        script). InvalidArgument when it exists with another budget."""
        try:
            return self.create_job(job_id, epsilon=epsilon, delta=delta, tenant=tenant,
                                   **create_args)
        except errors.AlreadyExists:
            job = self.job(job_id, tenant=tenant)
            if (job.info.budget.epsilon, job.info.budget.delta) != (epsilon, delta):
                raise errors.InvalidArgument(
                    f"job {job_id} exists with budget {job.info.budget}, not "
                    f"epsilon={epsilon}, delta={delta}") from None
            return job

    def job(self, job_id: str, *, tenant: Optional[str] = None) -> "Job":
        """The handle of an existing job; its sequence numbers resume from the server's."""
        return Job(self, self.get_job(job_id, tenant=tenant))

    def get_job(self, job_id: str, *, tenant: Optional[str] = None) -> JobInfo:
        return JobInfo.from_proto(self._call(
            "GetJob", pb.GetJobRequest(job_id=job_id, tenant=self._tenant(tenant))))

    def list_jobs(self, *, page_size: int = 0, tenant: Optional[str] = None) -> Iterator[JobInfo]:
        """Every job of the tenant, ordered by job_id (pages followed lazily)."""
        token = ""
        while True:
            r = self._call("ListJobs", pb.ListJobsRequest(
                tenant=self._tenant(tenant), page_size=page_size, page_token=token))
            yield from (JobInfo.from_proto(j) for j in r.jobs)
            token = r.next_page_token
            if not token:
                return

    def close_job(self, job_id: str, *, tenant: Optional[str] = None) -> JobInfo:
        """Closes a job: no more steps or releases; queries still answer."""
        request = pb.CloseJobRequest(job_id=job_id, tenant=self._tenant(tenant))

        def closed_earlier(error):  # a lost answer to an attempt that did close it
            if isinstance(error, errors.FailedPrecondition):
                job = self._call("GetJob", pb.GetJobRequest(job_id=job_id, tenant=request.tenant))
                return job if job.state == pb.JOB_STATE_CLOSED else None
            return None
        return JobInfo.from_proto(self._call("CloseJob", request, on_retry_error=closed_earlier))

    # -- steps -----------------------------------------------------------------------

    def append_steps(self, job_id: str, updates: Sequence[Tuple[int, Sequence[StepLike]]], *,
                     tenant: Optional[str] = None) -> List[StepAck]:
        """AppendSteps: updates as (seq, steps). Refusals are data here (acks with
        admitted=False; the first stops the batch); gaps and conflicts raise."""
        request = pb.AppendStepsRequest(job_id=job_id, tenant=self._tenant(tenant), updates=[
            pb.StepUpdate(seq=seq, steps=[to_step(s).to_proto() for s in steps])
            for seq, steps in updates])
        return [StepAck.from_proto(a) for a in self._call("AppendSteps", request).acks]

    def verify_chain(self, job_id: str, held_seq: int, held_head: str, *,
                     tenant: Optional[str] = None) -> str:
        """Checks that the job's history up to ``held_seq`` is still the one whose chain head
        was ``held_head`` (from an ack's ``proto.chain_head`` or a job's): recomputes the
        chain from GetJob and GetLedger (dpledger.chain). Raises DataLoss naming the seq
        where it was rewritten; returns the current head."""
        from .chain import verify_chain
        job = self._call("GetJob", pb.GetJobRequest(job_id=job_id, tenant=self._tenant(tenant)))
        entries, after = [], 0
        while True:
            r = self._call("GetLedger", pb.GetLedgerRequest(
                job_id=job_id, tenant=self._tenant(tenant), after_seq=after))
            entries.extend(r.entries)
            if not r.more or not r.entries:
                break
            after = r.entries[-1].seq
        return verify_chain(job, entries, held_seq, held_head)

    def ledger_entries(self, job_id: str, *, after_seq: int = 0, page_size: int = 0,
                       tenant: Optional[str] = None) -> Iterator[LedgerEntry]:
        """GetLedger: the admitted updates with seq > after_seq, in order (pages followed)."""
        while True:
            r = self._call("GetLedger", pb.GetLedgerRequest(
                job_id=job_id, tenant=self._tenant(tenant), after_seq=after_seq,
                page_size=page_size))
            for e in r.entries:
                after_seq = e.seq
                yield LedgerEntry.from_proto(e)
            if not r.more or not r.entries:
                return

    # -- queries ---------------------------------------------------------------------

    def spent(self, job_id: str, *, delta: Optional[float] = None,
              epsilon: Optional[float] = None, accountant: Optional[str] = None,
              tenant: Optional[str] = None, pld_precision: Optional[float] = None) -> Spent:
        """Spent: epsilon at ``delta``, or delta at ``epsilon`` (exactly one), by the job's
        admitting accountant or the named one. ``pld_precision`` (pld only): the target
        relative width (upper - lower) / lower of the certified interval (the upper end is
        at most this far above the truth), in (0, 0.5]; smaller costs more time."""
        if (delta is None) == (epsilon is None):
            raise errors.InvalidArgument("give exactly one of delta or epsilon")
        request = pb.SpentRequest(job_id=job_id, tenant=self._tenant(tenant),
                                  accountant=accountant or "", pld_precision=pld_precision or 0)
        if delta is not None:
            request.delta = delta
        else:
            request.epsilon = epsilon
        return Spent.from_proto(self._call("Spent", request))

    def remaining(self, job_id: str, mechanism: MechanismLike, *,
                  tenant: Optional[str] = None) -> Remaining:
        """How many more applications of ``mechanism`` the budget admits."""
        return Remaining.from_proto(self._call("Remaining", pb.RemainingRequest(
            job_id=job_id, tenant=self._tenant(tenant), step=to_step(mechanism).to_proto())))

    # -- releases --------------------------------------------------------------------

    def release(self, job_id: str, *, payload: bytes, epsilon: float, delta_est: float,
                tau: float = 0.0, rho: float = 0.0, request_id: Optional[str] = None,
                max_samples: int = 0, tenant: Optional[str] = None) -> Release:
        """Release (Estimate-Verify-Release): claims (epsilon, delta_est) for the job's whole
        ledger; the server verifies it and records the payload. Raises FailedPrecondition
        when verification fails. A fresh request_id makes retries safe."""
        request = pb.ReleaseRequest(
            job_id=job_id, tenant=self._tenant(tenant), payload=payload, epsilon=epsilon,
            delta_est=delta_est, tau=tau, rho=rho, max_samples=max_samples,
            request_id=request_id or f"py-{uuid.uuid4().hex}")
        return Release.from_proto(self._call("Release", request))

    def get_release(self, release_id: str, *, include_payload: bool = False,
                    tenant: Optional[str] = None) -> Release:
        return Release.from_proto(self._call("GetRelease", pb.GetReleaseRequest(
            release_id=release_id, tenant=self._tenant(tenant), include_payload=include_payload)))


class Job:
    """One job's handle: numbers its updates (from the server's last_seq) and charges them.
    Thread-safe: updates from several threads are serialised."""

    def __init__(self, ledger: Ledger, info: JobInfo):
        self.ledger = ledger
        self.info = info
        self.job_id = info.job_id
        self.tenant = info.tenant
        self._last_seq = info.last_seq
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Job({self.job_id!r}, tenant={self.tenant!r}, last_seq={self._last_seq})"

    @property
    def last_seq(self) -> int:
        """The highest seq this handle knows to be admitted."""
        return self._last_seq

    def _admitted(self, last_seq: int) -> None:
        self._last_seq = max(self._last_seq, last_seq)

    def refresh(self) -> JobInfo:
        """Reads the job back (GetJob) and resumes numbering from the server's last_seq."""
        self.info = self.ledger.get_job(self.job_id, tenant=self.tenant)
        with self._lock:
            self._last_seq = self.info.last_seq
        return self.info

    def step(self, mechanism: MechanismLike, count: int = 1, *,
             seq: Optional[int] = None) -> StepAck:
        """Charges ``count`` applications of ``mechanism`` as one update. Returns the ack
        (``duplicate=True`` when ``seq`` was already admitted: nothing charged); raises
        BudgetExceeded when the budget refuses it, PlanViolation when it departs from a
        declared job's plan (no seq consumed either way)."""
        return self.update([Step(mechanism, count)], seq=seq)

    def update(self, steps: Sequence[StepLike], *, seq: Optional[int] = None) -> StepAck:
        """Charges several steps as one update (admitted or refused together)."""
        with self._lock:
            seq = self._last_seq + 1 if seq is None else seq
            acks = self.ledger.append_steps(self.job_id, [(seq, steps)], tenant=self.tenant)
            if len(acks) != 1:
                raise errors.Internal(f"AppendSteps answered {len(acks)} acks for 1 update")
            ack = acks[0]
            if ack.admitted:
                self._admitted(ack.last_seq)
            return ack.raise_for_error()

    def stream(self, *, window: int = 256) -> "StepStream":
        """A pipelined StreamSteps connection (see :class:`dpledger.StepStream`)."""
        from .stream import StepStream
        return StepStream(self, window=window)

    def spent(self, *, delta: Optional[float] = None, epsilon: Optional[float] = None,
              accountant: Optional[str] = None, pld_precision: Optional[float] = None) -> Bound:
        """Epsilon spent at ``delta`` (or delta at ``epsilon``) as a Bound."""
        return self.spent_report(delta=delta, epsilon=epsilon, accountant=accountant,
                                 pld_precision=pld_precision).bound

    def spent_report(self, *, delta: Optional[float] = None, epsilon: Optional[float] = None,
                     accountant: Optional[str] = None,
                     pld_precision: Optional[float] = None) -> Spent:
        """The whole Spent answer: bound, accountant, num_steps, diagnostics."""
        return self.ledger.spent(self.job_id, delta=delta, epsilon=epsilon,
                                 accountant=accountant, tenant=self.tenant,
                                 pld_precision=pld_precision)

    def remaining(self, mechanism: MechanismLike) -> Remaining:
        return self.ledger.remaining(self.job_id, mechanism, tenant=self.tenant)

    def entries(self, *, after_seq: int = 0) -> Iterator[LedgerEntry]:
        return self.ledger.ledger_entries(self.job_id, after_seq=after_seq, tenant=self.tenant)

    def release(self, *, payload: bytes, epsilon: float, delta_est: float,
                **options) -> Release:
        """See :meth:`Ledger.release` (options: tau, rho, request_id, max_samples)."""
        return self.ledger.release(self.job_id, payload=payload, epsilon=epsilon,
                                   delta_est=delta_est, tenant=self.tenant, **options)

    def close(self) -> JobInfo:
        self.info = self.ledger.close_job(self.job_id, tenant=self.tenant)
        return self.info
