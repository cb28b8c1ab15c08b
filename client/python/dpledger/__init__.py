"""dpledger: the Python client of the dpledger privacy-budget service.

    from dpledger import Ledger, SubsampledGaussian
    with Ledger("127.0.0.1:50051") as ledger:
        job = ledger.create_job("run-1", epsilon=8, delta=1e-9)
        ack = job.step(SubsampledGaussian(sigma=1.0, q=1e-3))
        print(job.spent(delta=1e-9))

Integrations: :class:`dpledger.opacus.DpledgerAccountant` (Opacus' accountant interface) and
:class:`dpledger.flower.PrivacyGate` (a round gate in the shape of Flower's privacy accountant).

The gRPC stubs (``dpledger._generated``) are generated from proto/dpledger.proto, never
committed: ``pip install`` generates them into the package (setup.py), and the CMake build
into ``<build>/client/python/dpledger/_generated`` for tests and source-tree use. A source
checkout finds them there through ``DPLEDGER_PY_STUBS=<build>/client/python`` or, by default,
``<repo>/build/client/python``.
"""
import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_stubs = _os.environ.get("DPLEDGER_PY_STUBS")
if _stubs:
    __path__.insert(0, _os.path.join(_stubs, "dpledger"))  # noqa: F821 (package __path__)
elif not _os.path.isdir(_os.path.join(_here, "_generated")):
    __path__.append(_os.path.join(_here, "..", "..", "..", "build", "client", "python", "dpledger"))  # noqa: F821

from .errors import (  # noqa: E402
    AlreadyExists, BudgetExceeded, DataLoss, DeadlineExceeded, DpledgerError,
    FailedPrecondition, Internal, InvalidArgument, NotFound, PermissionDenied,
    ResourceExhausted, Unauthenticated, Unavailable, Unimplemented)
from .mechanisms import (  # noqa: E402
    ApproxDP, Gaussian, Laplace, Mechanism, PureDP, RandomizedResponse, Step,
    SubsampledGaussian, SubsampledLaplace)
from .types import (  # noqa: E402
    Bound, Budget, Guarantee, JobInfo, LedgerEntry, Release, Remaining, Spent, StepAck)
from .ledger import Job, Ledger, RetryPolicy  # noqa: E402
from .stream import StepStream  # noqa: E402

__all__ = [
    "Ledger", "Job", "RetryPolicy", "StepStream",
    "Gaussian", "Laplace", "SubsampledGaussian", "SubsampledLaplace", "RandomizedResponse",
    "PureDP", "ApproxDP", "Mechanism", "Step",
    "Bound", "Budget", "Guarantee", "JobInfo", "LedgerEntry", "Release", "Remaining", "Spent",
    "StepAck",
    "DpledgerError", "BudgetExceeded", "InvalidArgument", "NotFound", "AlreadyExists",
    "FailedPrecondition", "PermissionDenied", "Unauthenticated", "ResourceExhausted",
    "Unimplemented", "DataLoss", "Unavailable", "DeadlineExceeded", "Internal",
]
