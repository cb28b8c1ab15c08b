"""The client against a real dpledgerd: every RPC round-trips, retries charge nothing,
refusals and errors are reported as specified (issue 13)."""
import grpc
import pytest

from dpledger import (
    AlreadyExists, BudgetExceeded, FailedPrecondition, Gaussian, Guarantee, InvalidArgument,
    Ledger, NotFound, PlanViolation, PureDP, RetryPolicy, Step, SubsampledGaussian)
from dpledger._generated import dpledger_pb2 as pb

SG = SubsampledGaussian(sigma=1.0, q=1e-3)
M = SubsampledGaussian(sigma=1.0, q=0.05)


def test_every_rpc_round_trips(ledger, job_id):
    # q = 0.05 rather than 1e-3: Remaining for q = 1e-3 takes the server 10-20 s.
    job = ledger.create_job(job_id, epsilon=8, delta=1e-9)
    assert (job.info.budget.epsilon, job.info.budget.delta, job.info.accountant) == (8, 1e-9, "pld")
    assert job.last_seq == 0 and job.info.open
    ack = job.step(M, count=100)
    assert (ack.seq, ack.admitted, ack.duplicate, ack.num_steps) == (1, True, False, 100)
    assert ack.spent.guarantee is Guarantee.CERTIFIED and 0 < ack.spent.lower <= ack.spent.upper
    assert ack.admission_guarantee == "natural filter over a declared schedule (pld)"
    # AppendSteps with two updates; a SPEC string and a Step with count.
    acks = ledger.append_steps(job_id, [(2, [M]), (3, [
        "subsampled_gaussian:sigma=1,q=0.05,count=2", Step(M, 10)])])
    assert [(a.seq, a.admitted, a.num_steps) for a in acks] == [(2, True, 101), (3, True, 113)]
    assert job.last_seq == 1  # the handle did not send those: refresh() resynchronises
    assert job.refresh().last_seq == 3
    with job.stream() as s:
        assert [s.send(M) for _ in range(3)] == [4, 5, 6]
        assert [(a.seq, a.admitted) for a in s.acks()] == [(4, True), (5, True), (6, True)]
    assert job.last_seq == 6
    info = ledger.get_job(job_id)
    assert (info.num_steps, info.last_seq, info.num_updates) == (116, 6, 6)
    assert job_id in [j.job_id for j in ledger.list_jobs(page_size=1)]
    entries = list(job.entries())
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5, 6]
    assert entries[0].steps == ["subsampled_gaussian:sigma=1,q=%.17g,count=100" % 0.05]
    assert [e.seq for e in job.entries(after_seq=4)] == [5, 6]
    eps = job.spent(delta=1e-9)
    assert eps.guarantee is Guarantee.CERTIFIED and eps.lower <= eps.estimate <= eps.upper
    assert eps == info.spent  # the job's spent is epsilon at its own delta
    report = job.spent_report(epsilon=eps.upper)
    assert report.accountant == "pld" and report.num_steps == 116 and report.last_seq == 6
    assert report.query_epsilon == eps.upper and report.query_delta is None
    assert report.bound.upper <= 1e-9 * 1.01
    assert job.spent(delta=1e-9, accountant="rdp").upper >= eps.lower
    assert info.schedule == "declared" and info.admission == "natural" and info.plan == []
    assert report.admission_guarantee == ack.admission_guarantee and not report.realised_curve
    rem = job.remaining(M)
    assert rem.max_additional_steps > 0 and rem.spent_at_max.upper <= 8 and rem.reason
    assert rem.budget.epsilon == 8 and rem.accountant == "pld" and rem.spent == eps
    release = job.release(payload=b"histogram", epsilon=8.0, delta_est=1e-8)
    assert release.job_id == job_id and release.ledger_seq == 6 and release.payload_size == 9
    assert release.guarantee in (Guarantee.STATISTICAL, Guarantee.CERTIFIED)
    again = ledger.get_release(release.release_id, include_payload=True)
    assert again.payload == b"histogram" and again.payload_sha256 == release.payload_sha256
    assert ledger.health()
    closed = job.close()
    assert not closed.open and closed.close_time_unix_ms > 0
    with pytest.raises(FailedPrecondition):
        job.step(M)


def test_remaining_agrees_with_admission(ledger, job_id):
    # PLD at delta 1e-5 for subsampled_gaussian:sigma=1,q=0.05: 1.033 (1 step), 1.183 (2),
    # 1.281 (3): a budget of 1.25 admits two steps.
    m = SubsampledGaussian(sigma=1.0, q=0.05)
    job = ledger.create_job(job_id, epsilon=1.25, delta=1e-5)
    rem = job.remaining(m)
    assert rem.max_additional_steps == 2
    assert rem.spent_at_max.upper == pytest.approx(1.183, rel=1e-2)
    with pytest.raises(BudgetExceeded):
        job.step(m, count=3)
    assert job.step(m, count=2).spent == rem.spent_at_max
    assert job.remaining(m).max_additional_steps == 0


def test_every_rpc_of_the_proto_has_a_method():
    # A new RPC in proto/dpledger.proto fails here until the client wraps it.
    wrapped = {"CreateJob": "create_job", "GetJob": "get_job", "ListJobs": "list_jobs",
               "CloseJob": "close_job", "AppendSteps": "append_steps",
               "StreamSteps": "stream", "GetLedger": "ledger_entries", "Spent": "spent",
               "Remaining": "remaining", "Release": "release", "GetRelease": "get_release"}
    methods = [m.name for m in pb.DESCRIPTOR.services_by_name["Ledger"].methods]
    assert sorted(methods) == sorted(wrapped)


def test_a_resumed_job_continues_from_the_servers_last_seq(ledger, job_id):
    ledger.create_job(job_id, epsilon=8, delta=1e-9).step(SG)
    other = ledger.job(job_id)  # e.g. a restarted trainer
    assert other.last_seq == 1
    assert other.step(SG).seq == 2


def test_a_retried_seq_charges_nothing(ledger, job_id):
    job = ledger.create_job(job_id, epsilon=8, delta=1e-9)
    first = job.step(SG, count=10)
    again = job.step(SG, count=10, seq=1)  # the same update again
    assert again.duplicate and again.admitted and again.seq == 1
    assert again.spent == first.spent and again.num_steps == 10
    assert ledger.get_job(job_id).num_steps == 10
    with pytest.raises(AlreadyExists, match="seq"):
        job.step(SG, count=11, seq=1)  # same seq, other content
    with pytest.raises(FailedPrecondition, match="seq"):
        job.step(SG, seq=5)  # a gap
    assert job.step(SG).seq == 2


class LoseFirstReply(grpc.UnaryUnaryClientInterceptor):
    """Lets the first call of ``method`` reach the server, then reports UNAVAILABLE as if
    its reply had been lost."""

    class Lost(grpc.RpcError, grpc.Call):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "reply lost (test)"

    def __init__(self, method: str):
        self.method = method
        self.lost = 0

    def intercept_unary_unary(self, continuation, details, request):
        outcome = continuation(details, request)
        if details.method.endswith(self.method) and self.lost == 0:
            outcome.result()  # the server has answered
            self.lost += 1
            raise self.Lost()
        return outcome


def test_a_retry_after_a_lost_reply_resends_the_same_seq(server, job_id):
    lose = LoseFirstReply("/AppendSteps")
    with Ledger(server.address, interceptors=[lose]) as ledger:
        job = ledger.create_job(job_id, epsilon=8, delta=1e-9)
        ack = job.step(SG, count=7)
        assert lose.lost == 1
        assert ack.duplicate and ack.seq == 1 and ack.num_steps == 7
        assert ledger.get_job(job_id).num_steps == 7
        assert job.step(SG).seq == 2


def test_create_job_retried_after_a_lost_reply_returns_the_job(server, job_id):
    lose = LoseFirstReply("/CreateJob")
    with Ledger(server.address, interceptors=[lose]) as ledger:
        job = ledger.create_job(job_id, epsilon=3, delta=1e-7)
        assert lose.lost == 1 and job.info.budget.epsilon == 3


def test_a_refused_step_raises_budget_exceeded_and_consumes_no_seq(ledger, job_id):
    job = ledger.create_job(job_id, epsilon=1, delta=1e-9)
    p = PureDP(epsilon=0.3)
    job.step(p)
    with pytest.raises(BudgetExceeded) as refused:
        job.step(p, count=3)
    ack = refused.value.ack
    assert not ack.admitted and ack.seq == 2 and ack.refusal_kind == "budget"
    assert str(refused.value) == ack.refusal_reason
    # PLD bounds on epsilon at delta 1e-9 of 4 x 0.3 and 0.3 pure DP (pure DP composes
    # additively; at delta > 0 epsilon is a hair below, the grid costs at most 1%).
    assert ack.candidate.upper == pytest.approx(1.2, rel=1e-2)
    assert ack.spent.upper == pytest.approx(0.3, rel=1e-2)
    assert job.step(p, count=2).seq == 2


def test_a_declared_plan_is_followed_and_a_step_off_it_is_a_plan_violation(ledger, job_id):
    plan = [Step(SG, 5), Step(Gaussian(sigma=10), 1)]
    job = ledger.create_job(job_id, epsilon=8, delta=1e-9, plan=plan)
    assert job.info.schedule == "declared" and len(job.info.plan) == 2
    with pytest.raises(PlanViolation, match="plan") as off:
        job.step(Gaussian(sigma=10))  # the plan starts with SG
    assert off.value.ack.refusal_kind == "plan" and job.last_seq == 0
    assert job.step(SG, count=5).admitted and job.step(Gaussian(sigma=10)).admitted


def test_an_adaptive_job_admits_mechanisms_chosen_at_run_time(ledger, job_id):
    job = ledger.create_job(job_id, epsilon=2, delta=1e-6, schedule="adaptive", filter="gdp")
    assert (job.info.schedule, job.info.admission) == ("adaptive", "gdp")
    assert "gdp" in job.info.admission_guarantee
    for sigma in (10, 5, 20):  # e.g. chosen from earlier rounds
        assert job.step(Gaussian(sigma=sigma)).admitted
    # A tight accountant's answer is the realised ledger's curve, not the job's guarantee.
    assert job.spent_report(delta=1e-6, accountant="pld").realised_curve
    with pytest.raises(InvalidArgument):
        ledger.create_job(job_id + "-x", epsilon=1, delta=1e-6, schedule="sometimes")


def test_in_a_stream_a_refusal_is_data_and_the_next_update_reuses_its_seq(ledger, job_id):
    job = ledger.create_job(job_id, epsilon=1, delta=1e-9)
    p = PureDP(epsilon=0.3)
    with job.stream() as s:
        s.send(p)
        s.send(p, count=3)  # refused
        s.send(p)  # pipelined behind it
        a1, a2, a3 = list(s.acks())
        assert (a1.seq, a1.admitted) == (1, True)
        assert (a2.seq, a2.refused, a2.error_code, a2.refusal_kind) == (2, True, 0, "budget")
        # Pipelined behind a refusal: refused too, or a gap, but never admitted.
        assert a3.seq == 3 and not a3.admitted
        assert a3.error_code in (0, grpc.StatusCode.FAILED_PRECONDITION.value[0])
        with pytest.raises((BudgetExceeded, FailedPrecondition)):
            a3.raise_for_error()
        with pytest.raises(BudgetExceeded):
            a2.raise_for_error()
        assert s.send(p, count=2) == 2
        assert s.recv().admitted
    assert ledger.get_job(job_id).last_seq == 2


def test_errors_are_exceptions_with_the_servers_message(ledger, job_id):
    with pytest.raises(NotFound, match="not found"):
        ledger.job("no-such-job")
    with pytest.raises(InvalidArgument, match="epsilon"):
        ledger.create_job(job_id, epsilon=-1, delta=1e-9)
    ledger.create_job(job_id, epsilon=1, delta=1e-9)
    with pytest.raises(AlreadyExists):
        ledger.create_job(job_id, epsilon=1, delta=1e-9)
    with pytest.raises(InvalidArgument, match="sigma"):
        ledger.job(job_id).step(Gaussian(sigma=-1))
    with pytest.raises(InvalidArgument):
        ledger.spent(job_id, delta=1e-9, epsilon=1)
    assert ledger.open_job(job_id, epsilon=1, delta=1e-9).job_id == job_id
    with pytest.raises(InvalidArgument, match="budget"):
        ledger.open_job(job_id, epsilon=2, delta=1e-9)


def test_an_unreachable_server_is_unavailable_after_the_retries():
    from conftest import free_port
    from dpledger import Unavailable
    with Ledger(f"127.0.0.1:{free_port()}", timeout=1,
                retry=RetryPolicy(max_attempts=2, initial_backoff=0.01)) as ledger:
        with pytest.raises(Unavailable):
            ledger.get_job("x")


def test_verify_chain_recomputes_the_servers_heads_and_detects_a_rewrite(ledger, job_id):
    """Issue 11 (Hardening) defect 7: the Python verifier computes the server's chain byte for
    byte, and a history that differs from a held head is DataLoss naming the seq."""
    from dpledger import DataLoss, chain
    job = ledger.create_job(job_id, epsilon=8, delta=1e-9)
    assert job.info.proto.chain_head == chain.genesis(job.info.proto)
    acks = [job.step(M) for _ in range(3)]
    held = acks[1]
    assert len(held.proto.chain_head) == 64
    assert ledger.verify_chain(job_id, held.last_seq, held.proto.chain_head) == acks[2].proto.chain_head
    with pytest.raises(DataLoss, match="rewritten at or before seq 2: the held head"):
        ledger.verify_chain(job_id, 2, "0" * 64)
    # A ledger whose seq-2 charge was lowered (and re-headed) no longer yields the held head.
    info = ledger.get_job(job_id).proto
    entries = list(ledger._call("GetLedger", pb.GetLedgerRequest(job_id=job_id)).entries)
    entries[1].spent.upper /= 2
    entries[1].chain_head = chain.next_head(info, entries[0].chain_head, entries[1])
    with pytest.raises(DataLoss, match="seq 2: the held head"):
        chain.verify_chain(info, entries, 2, held.proto.chain_head)
