"""Exceptions: one per gRPC status code the server uses, carrying the server's message.

A step the budget cannot admit is not a gRPC error (its ack says admitted=False);
:meth:`dpledger.Job.step` turns it into :class:`BudgetExceeded`, while a stream reports it
as data (an ack with ``admitted=False``).
"""
from typing import Optional

import grpc


class DpledgerError(Exception):
    """Base class. ``code`` is the gRPC status code (None for BudgetExceeded), ``message``
    the server's message unchanged."""

    code: Optional[grpc.StatusCode] = None

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(DpledgerError, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(DpledgerError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(DpledgerError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(DpledgerError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(DpledgerError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(DpledgerError):
    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(DpledgerError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unimplemented(DpledgerError):
    code = grpc.StatusCode.UNIMPLEMENTED


class DataLoss(DpledgerError):
    code = grpc.StatusCode.DATA_LOSS


class Unavailable(DpledgerError, ConnectionError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(DpledgerError, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Internal(DpledgerError):
    code = grpc.StatusCode.INTERNAL


class BudgetExceeded(DpledgerError):
    """A step the job's budget cannot admit. ``ack`` is the server's refusal
    (:class:`dpledger.StepAck`: ``refusal_reason``, ``spent`` and ``candidate``)."""

    def __init__(self, ack):
        super().__init__(ack.refusal_reason or f"step seq {ack.seq} refused by the budget")
        self.ack = ack


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, PermissionDenied,
    Unauthenticated, ResourceExhausted, Unimplemented, DataLoss, Unavailable,
    DeadlineExceeded, Internal)}
_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def from_status(code: grpc.StatusCode, message: str) -> DpledgerError:
    """The exception for a gRPC status (DpledgerError for codes without a class)."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls else DpledgerError(message, code)


def from_rpc_error(error: grpc.RpcError) -> DpledgerError:
    return from_status(error.code(), error.details() or str(error))


def from_code_number(number: int, message: str) -> DpledgerError:
    """The exception for a google.rpc.Code value (a stream ack's error_code)."""
    code = _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
    return from_status(code, message)
