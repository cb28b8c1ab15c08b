"""The answers of the service as dataclasses (built from the proto messages)."""
import enum
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ._generated import dpledger_pb2 as pb


class Guarantee(str, enum.Enum):
    """What kind of statement a Bound is (proto ``Guarantee``)."""
    UNSPECIFIED = "unspecified"
    CERTIFIED = "certified"      # a proven bound: the truth lies in [lower, upper]
    STATISTICAL = "statistical"  # holds except with probability failure_probability (EVR)
    ESTIMATE = "estimate"        # a point estimate with no guarantee

    @classmethod
    def from_proto(cls, value: int) -> "Guarantee":
        return {pb.GUARANTEE_CERTIFIED: cls.CERTIFIED, pb.GUARANTEE_STATISTICAL: cls.STATISTICAL,
                pb.GUARANTEE_ESTIMATE: cls.ESTIMATE}.get(value, cls.UNSPECIFIED)


@dataclass(frozen=True)
class Bound:
    """An interval for epsilon (nats) or delta. Budgets are charged with ``upper``."""
    lower: float
    estimate: float
    upper: float
    guarantee: Guarantee
    failure_probability: float = 0.0

    @classmethod
    def from_proto(cls, b: pb.Bound) -> "Bound":
        return cls(b.lower, b.estimate, b.upper, Guarantee.from_proto(b.guarantee),
                   b.failure_probability)


@dataclass(frozen=True)
class Budget:
    epsilon: float  # nats
    delta: float

    @classmethod
    def from_proto(cls, b: pb.Budget) -> "Budget":
        return cls(b.epsilon, b.delta)


@dataclass(frozen=True)
class JobInfo:
    """A job as the server reports it (proto ``Job``)."""
    job_id: str
    tenant: str
    budget: Budget
    accountant: str
    open: bool
    num_steps: int
    last_seq: int
    num_updates: int
    spent: Bound
    num_releases: int
    create_time_unix_ms: int
    close_time_unix_ms: int
    admission_stopped: str
    proto: pb.Job = field(repr=False, compare=False)  # every field, including newer ones

    @classmethod
    def from_proto(cls, j: pb.Job) -> "JobInfo":
        return cls(j.job_id, j.tenant, Budget.from_proto(j.budget), j.accountant,
                   j.state == pb.JOB_STATE_OPEN, j.num_steps, j.last_seq, j.num_updates,
                   Bound.from_proto(j.spent), j.num_releases, j.create_time_unix_ms,
                   j.close_time_unix_ms, j.admission_stopped, j)


@dataclass(frozen=True)
class StepAck:
    """The answer to one update. ``admitted=False`` with ``refusal_reason``: the budget
    refused it (``candidate`` is the bound it would have reached). ``error_code`` != 0
    (streams only): a per-update error, see :meth:`raise_for_error`."""
    seq: int
    admitted: bool
    duplicate: bool
    spent: Bound
    candidate: Optional[Bound]
    num_steps: int
    last_seq: int
    refusal_reason: str
    error_code: int
    error_message: str
    accountant: str
    budget: Budget
    proto: pb.StepAck = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, a: pb.StepAck) -> "StepAck":
        return cls(a.seq, a.admitted, a.duplicate, Bound.from_proto(a.spent),
                   Bound.from_proto(a.candidate) if a.HasField("candidate") else None,
                   a.num_steps, a.last_seq, a.refusal_reason, a.error_code, a.error_message,
                   a.accountant, Budget.from_proto(a.budget), a)

    @property
    def refused(self) -> bool:
        """True when the budget refused the update (not an error)."""
        return not self.admitted and self.error_code == 0

    def raise_for_error(self) -> "StepAck":
        """Raises the exception of a per-update error or a refusal; returns self otherwise."""
        from .errors import BudgetExceeded, from_code_number
        if self.error_code:
            raise from_code_number(self.error_code, self.error_message)
        if not self.admitted:
            raise BudgetExceeded(self)
        return self


@dataclass(frozen=True)
class Spent:
    """The answer of a Spent query: ``bound`` is epsilon for a delta query, delta for an
    epsilon query."""
    accountant: str
    bound: Bound
    num_steps: int
    last_seq: int
    query_delta: Optional[float]
    query_epsilon: Optional[float]
    diagnostics: Dict[str, Union[float, str]]

    @classmethod
    def from_proto(cls, r: pb.SpentResponse) -> "Spent":
        for_delta = r.WhichOneof("result") == "epsilon"
        diagnostics = {d.name: (d.number if d.WhichOneof("value") == "number" else d.text)
                       for d in r.diagnostics}
        return cls(r.accountant, Bound.from_proto(r.epsilon if for_delta else r.delta),
                   r.num_steps, r.last_seq, r.query_delta if for_delta else None,
                   None if for_delta else r.query_epsilon, diagnostics)


@dataclass(frozen=True)
class Remaining:
    """How many more applications of a mechanism the budget admits (certified upper bound)."""
    max_additional_steps: int
    spent: Bound
    spent_at_max: Bound
    budget: Budget
    accountant: str

    @classmethod
    def from_proto(cls, r: pb.RemainingResponse) -> "Remaining":
        return cls(r.max_additional_steps, Bound.from_proto(r.spent),
                   Bound.from_proto(r.spent_at_max), Budget.from_proto(r.budget), r.accountant)


@dataclass(frozen=True)
class LedgerEntry:
    """One admitted update: its steps as normalised SPEC strings (with count)."""
    seq: int
    steps: List[str]
    spent: Bound
    commit_time_unix_ms: int

    @classmethod
    def from_proto(cls, e: pb.LedgerEntry) -> "LedgerEntry":
        return cls(e.seq, [s.spec for s in e.steps], Bound.from_proto(e.spent),
                   e.commit_time_unix_ms)


@dataclass(frozen=True)
class Release:
    """A verified release (proto ``ReleaseRecord``): the certified statement is
    (epsilon, delta) with ``guarantee`` (STATISTICAL for EVR, CERTIFIED for the fallback)."""
    release_id: str
    job_id: str
    tenant: str
    epsilon: float
    delta: float
    delta_est: float
    guarantee: Guarantee
    failure_probability: float
    verifier: str
    payload_sha256: str
    payload_size: int
    ledger_seq: int
    num_steps: int
    request_id: str
    payload: Optional[bytes]
    proto: pb.ReleaseRecord = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, r: pb.ReleaseRecord) -> "Release":
        return cls(r.release_id, r.job_id, r.tenant, r.epsilon, r.delta, r.delta_est,
                   Guarantee.from_proto(r.guarantee), r.failure_probability, r.verifier.verifier,
                   r.payload_sha256, r.payload_size, r.ledger_seq, r.num_steps, r.request_id,
                   r.payload if r.payload else None, r)
