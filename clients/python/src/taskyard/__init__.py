"""taskyard: a client and a worker for the taskyard job scheduler.

``Client`` submits and controls jobs through a coordinator's client
listener; ``Worker`` runs task handlers for its worker listener. Both speak
taskyard's framed MessagePack protocol over TCP (or TLS) directly; the only
dependency is ``msgpack``, and the package is pure Python (safe to import
before ``fork``; make clients and workers after it).
"""

from taskyard.client import Client, Submission, encode_payload
from taskyard.errors import (
    BatchRejected,
    JobFailed,
    NotDurable,
    NotFound,
    Overloaded,
    ProtocolMismatch,
    Refused,
    Rejected,
    TaskyardError,
    Timeout,
    Unauthorized,
    Unreachable,
)
from taskyard.views import Attempt, JobSummary, JobView, Progress, WorkerView
from taskyard.wire import PROTOCOL_VERSION
from taskyard.worker import Permanent, Retryable, TaskContext, Worker, encode_result

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION",
    "Attempt",
    "BatchRejected",
    "Client",
    "JobFailed",
    "JobSummary",
    "JobView",
    "NotDurable",
    "NotFound",
    "Overloaded",
    "Permanent",
    "Progress",
    "ProtocolMismatch",
    "Refused",
    "Rejected",
    "Retryable",
    "Submission",
    "TaskContext",
    "TaskyardError",
    "Timeout",
    "Unauthorized",
    "Unreachable",
    "Worker",
    "WorkerView",
    "encode_payload",
    "encode_result",
]
