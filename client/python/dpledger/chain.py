"""Client-side check of the tamper-evident ledger (README "Security: the tamper-evident ledger";
the encoding is server/ledger_chain.h's, byte for byte).

Keep ``(ack.last_seq, ack.proto.chain_head)`` from an ack; later
``ledger.verify_chain(job_id, seq, head)`` recomputes the job's chain from GetJob and GetLedger
and raises :class:`dpledger.DataLoss` if the history it was told has been rewritten.
"""
import hashlib
import struct
from typing import Iterable

from ._generated import dpledger_pb2 as pb
from .errors import DataLoss

_GUARANTEE = {pb.GUARANTEE_CERTIFIED: "certified", pb.GUARANTEE_STATISTICAL: "statistical",
              pb.GUARANTEE_ESTIMATE: "estimate"}


class _Encoder:
    """Length-prefixed fields ("<bytes>:<text>"): integers in decimal, doubles as the 16 hex
    digits of their IEEE-754 bits."""

    def __init__(self, kind: str):
        self._out = bytearray()
        self.text(kind)

    def text(self, s: str) -> "_Encoder":
        b = s.encode()
        self._out += b"%d:" % len(b) + b
        return self

    def int(self, v: int) -> "_Encoder":
        return self.text(str(v))

    def real(self, v: float) -> "_Encoder":
        return self.text(struct.pack(">d", v).hex())

    def hash(self) -> str:
        return hashlib.sha256(bytes(self._out)).hexdigest()


def _steps_text(steps) -> str:
    return ";".join(s.spec for s in steps)


def genesis(job: pb.Job) -> str:
    """Head 0: the job's creation record."""
    return (_Encoder("dpledger-job-v1").text(job.tenant).text(job.job_id)
            .real(job.budget.epsilon).real(job.budget.delta)
            .int(2 if job.neighbouring == pb.NEIGHBOURING_RELATION_REPLACE_ONE else 1)
            .text(job.accountant).text(str(job.mc.seed)).int(job.mc.num_samples)
            .int(2 if job.schedule == pb.SCHEDULE_ADAPTIVE else 1).text(job.admission)
            .text(_steps_text(job.plan)).real(job.rdp_order).int(job.create_time_unix_ms)
            .hash())


def next_head(job: pb.Job, prev: str, e: pb.LedgerEntry) -> str:
    """The head after ledger entry ``e`` given the head before it."""
    b = e.spent
    return (_Encoder("dpledger-update-v1").text(prev).text(job.tenant).text(job.job_id)
            .int(e.seq).text(_steps_text(e.steps)).real(b.lower).real(b.estimate).real(b.upper)
            .text(_GUARANTEE.get(b.guarantee, "unspecified")).real(b.failure_probability)
            .int(e.num_steps_after).int(e.commit_time_unix_ms).hash())


def verify_chain(job: pb.Job, entries: Iterable[pb.LedgerEntry], held_seq: int,
                 held_head: str) -> str:
    """Recomputes ``job``'s chain over ``entries`` (its ledger from seq 1, in order); raises
    DataLoss naming the first seq where it differs from the entries' heads, from ``held_head``
    at ``held_seq`` (0: head 0) or from the job's chain_head. Returns the last head."""
    def rewritten(seq: int, what: str) -> DataLoss:
        return DataLoss(f"ledger of job '{job.tenant}/{job.job_id}' was rewritten at or before "
                        f"seq {seq}: {what}")
    head = genesis(job)
    if held_seq == 0 and head != held_head:
        raise rewritten(0, "the job's configuration is not the one the held head was computed from")
    seq = 0
    for e in entries:
        if e.seq != seq + 1:
            raise rewritten(e.seq, f"seq {e.seq} follows seq {seq}")
        seq = e.seq
        head = next_head(job, head, e)
        if e.chain_head != head:
            raise rewritten(seq, f"the entry's chain_head {e.chain_head} is not the recomputed {head}")
        if seq == held_seq and head != held_head:
            raise rewritten(seq, f"the held head {held_head} is not the recomputed {head}")
    if seq < held_seq:
        raise rewritten(seq, f"the ledger ends at seq {seq} but seq {held_seq} was acknowledged")
    if seq == job.last_seq and job.chain_head != head:
        raise rewritten(seq, "the job's chain_head is not the recomputed head")
    return head
