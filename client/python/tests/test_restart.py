"""Retries across a server crash (kill -9 and restart on the same address): a unary step
waits for the server and charges once; a stream resends its unacknowledged updates with
their seqs, and the server answers the admitted ones as duplicates."""
import threading

from conftest import Server
from dpledger import Ledger, RetryPolicy, SubsampledGaussian

SG = SubsampledGaussian(sigma=1.0, q=1e-3)


def test_steps_survive_a_server_crash(tmp_path):
    server = Server(str(tmp_path / "data"), ["--insecure"]).start()
    try:
        with Ledger(server.address, retry=RetryPolicy(max_attempts=40, max_backoff=0.5)) as ledger:
            job = ledger.create_job("crash", epsilon=8, delta=1e-9)
            with job.stream(window=64) as s:
                for _ in range(50):
                    s.send(SG)
                first = [s.recv() for _ in range(10)]
                server.kill9()
                server.start()  # from this thread: the server dies with the thread that forked it
                rest = list(s.acks())
            acks = first + rest
            assert [a.seq for a in acks] == list(range(1, 51))
            assert all(a.admitted for a in acks)
            assert s.reconnects >= 1
            assert job.last_seq == 50 and ledger.get_job("crash").num_steps == 50

            server.kill9()
            result = {}
            stepper = threading.Thread(target=lambda: result.update(ack=job.step(SG, count=5)))
            stepper.start()  # retried until the server is back
            server.start()
            stepper.join()
            ack = result["ack"]
            assert (ack.seq, ack.admitted) == (51, True)
            assert ledger.get_job("crash").num_steps == 55
    finally:
        server.stop()
