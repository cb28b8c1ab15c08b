"""TLS with a test CA and bearer tokens (issue 13): tenants are kept apart."""
import pytest

from conftest import READER_A, WRITER_A, WRITER_B
from dpledger import (Gaussian, Ledger, NotFound, PermissionDenied, RetryPolicy,
                      Unauthenticated, Unavailable)

NO_RETRY = RetryPolicy(max_attempts=1)


def test_tls_and_tokens(tls_server, job_id):
    server, ca = tls_server
    with Ledger(server.address, tls=ca, token=WRITER_A) as a:
        job = a.create_job(job_id, epsilon=5, delta=1e-6)
        assert job.tenant == "team-a"
        assert job.step(Gaussian(sigma=3), count=2).admitted
    with open(ca, "rb") as f:
        pem = f.read()
    with Ledger(server.address, tls=pem, token=READER_A, retry=NO_RETRY) as reader:
        assert reader.job(job_id).info.num_steps == 2
        with pytest.raises(PermissionDenied, match="writer"):
            reader.job(job_id).step(Gaussian(sigma=3))
    with Ledger(server.address, tls=ca, token=WRITER_B, retry=NO_RETRY) as b:
        with pytest.raises(NotFound):
            b.job(job_id)
        with pytest.raises(NotFound):
            b.spent(job_id, delta=1e-6)
        with pytest.raises(PermissionDenied):
            b.get_job(job_id, tenant="team-a")
    with Ledger(server.address, tls=ca, token="", retry=NO_RETRY) as anonymous:
        with pytest.raises(Unauthenticated):
            anonymous.get_job(job_id)


def test_token_from_the_environment(tls_server, job_id, monkeypatch, tmp_path):
    server, ca = tls_server
    token_file = tmp_path / "token"
    token_file.write_text(WRITER_B + "\n")
    monkeypatch.setenv("DPLEDGER_CLIENT_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("DPLEDGER_CLIENT_TLS_CA", ca)
    with Ledger(server.address) as b:
        assert b.create_job(job_id, epsilon=1, delta=1e-6).tenant == "team-b"


def test_plaintext_to_a_tls_server_cannot_connect(tls_server):
    server, _ = tls_server
    with Ledger(server.address, tls=False, token=WRITER_A, timeout=2, retry=NO_RETRY) as plain:
        with pytest.raises(Unavailable):
            plain.get_job("x")
