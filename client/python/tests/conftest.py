"""Fixtures: real dpledgerd processes on free 127.0.0.1 ports (no mocked server).

The binaries come from $DPLEDGERD / $DPLEDGER_CLI (set by ctest; default: <repo>/build).
A missing binary fails the run rather than skipping it. Servers die with the test process
(PR_SET_PDEATHSIG) and are stopped at the end of the session.
"""
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))  # the package, from the source tree

from dpledger import Ledger  # noqa: E402

WRITER_A = "writer-token-team-a-0123456789"
READER_A = "reader-token-team-a-0123456789"
WRITER_B = "writer-token-team-b-0123456789"


def binary(env: str, default: str) -> str:
    path = os.environ.get(env) or os.path.join(REPO, "build", default)
    if not os.access(path, os.X_OK):
        pytest.exit(f"{env}: {path} is not an executable (build first)", returncode=3)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Children die with the test process (PR_SET_PDEATHSIG) via util-linux's setpriv: a
# preexec_fn would run Python in the forked child of a process with gRPC threads, which can
# abort or deadlock there (seen: "Fatal Python error: Aborted" in _execute_child).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


class Server:
    """A dpledgerd child process; ``address`` is host:port once started."""

    def __init__(self, data_dir: str, extra_args=(), ledger_args=None):
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.ledger_args = ledger_args or {}
        self.proc = None
        self.address = ""
        self.log_path = data_dir + ".log"

    def start(self, attempts: int = 5) -> "Server":
        """Starts dpledgerd on free ports; a restart (address already set) keeps the address."""
        restart = bool(self.address)
        for _ in range(1 if restart else attempts):
            if not restart:
                self.address = f"127.0.0.1:{free_port()}"
            argv = [binary("DPLEDGERD", "server/dpledgerd"), "--listen", self.address,
                    "--data-dir", self.data_dir, "--metrics-listen", "",
                    *self.extra_args]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(DIE_WITH_PARENT + argv, stdout=log,
                                             stderr=subprocess.STDOUT)
            with Ledger(self.address, **self.ledger_args) as probe:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and self.proc.poll() is None:
                    if probe.wait_ready(0.5):
                        return self
            if self.proc.poll() is None:
                break  # running but not serving: not a port clash
        self.stop()
        raise RuntimeError(f"dpledgerd did not start; log:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")

    def kill9(self) -> None:
        """SIGKILL: a crash at an arbitrary point."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """An insecure (plaintext, no auth) server with a SQLite store."""
    s = Server(str(tmp_path_factory.mktemp("plain") / "data"), ["--insecure"]).start()
    yield s
    s.stop()


@pytest.fixture
def ledger(server):
    with Ledger(server.address) as ledger:
        yield ledger


@pytest.fixture
def job_id(request) -> str:
    """A job id unique to the test."""
    return f"{request.node.name[:80]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")


def make_certificates(directory: str) -> None:
    """A CA and a server certificate for 127.0.0.1 / localhost signed by it (openssl CLI)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=dpledger-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext")


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory):
    """A server with TLS (a test CA) and bearer tokens for tenants team-a and team-b.
    Yields (server, path of the CA certificate)."""
    d = str(tmp_path_factory.mktemp("tls"))
    make_certificates(d)
    with open(os.path.join(d, "tokens"), "w") as f:
        f.write(f"{WRITER_A} team-a writer\n{READER_A} team-a reader\n{WRITER_B} team-b writer\n")
    os.chmod(os.path.join(d, "tokens"), 0o600)
    ca = os.path.join(d, "ca.crt")
    s = Server(os.path.join(d, "data"),
               ["--tls-cert", os.path.join(d, "server.crt"), "--tls-key",
                os.path.join(d, "server.key"), "--token-file", os.path.join(d, "tokens")],
               ledger_args={"tls": ca}).start()
    yield s, ca
    s.stop()
