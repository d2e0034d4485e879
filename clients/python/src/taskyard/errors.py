"""The exceptions this package raises, one class per way a call can fail.

They mirror the exit classes of the ``taskyard`` CLI: ``Unreachable`` (exit
2: the coordinator could not be reached or broke off the conversation),
``Rejected`` (3), ``JobFailed`` (1), ``Timeout`` (4), ``NotFound`` (5), and
``Unauthorized`` (a wrong or missing token; the CLI exits 2 for it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskyard.views import JobView


class TaskyardError(Exception):
    """Base class of every error this package raises."""


class Unreachable(TaskyardError):
    """No coordinator of the address list could be reached, or the connection
    was lost before the answer came (the request may or may not have run)."""

    def __init__(self, message: str, addr: str = "") -> None:
        super().__init__(message)
        self.addr = addr


class Refused(Unreachable):
    """The coordinator sent an ``Error`` frame and closed the connection."""


class ProtocolMismatch(Unreachable):
    """The coordinator speaks another protocol version, or sent a frame that
    is not what the protocol allows here, or is not taskyard at all, or this
    is its port for the other role (a worker on the client port)."""


class Unauthorized(TaskyardError):
    """The coordinator refused the token (missing or wrong)."""


class Overloaded(TaskyardError):
    """A per-connection limit of the coordinator refused the request; nothing ran."""


class NotDurable(TaskyardError):
    """The commit carrying the request failed: whether it took effect is
    unknown until the coordinator is ready again (``/readyz``). Submitting
    again with the same idempotency key is safe."""


class Rejected(TaskyardError):
    """The coordinator refused the submission (or the request); nothing was
    stored. ``field`` is the field the reason names (``"payload.millis"``,
    ``"priority"``), when it names one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        head, sep, _ = reason.partition(": ")
        self.field: str | None = head if sep and " " not in head else None


class BatchRejected(Rejected):
    """Some submissions of a ``submit_many`` were rejected. ``job_ids`` holds
    one entry per submission, in order: the id of each accepted job, ``None``
    for each rejected one; ``reasons`` maps the index of each rejected one to
    why. The accepted jobs exist."""

    def __init__(self, job_ids: list[str | None], reasons: dict[int, str]) -> None:
        first = min(reasons)
        super().__init__(reasons[first])
        self.job_ids = job_ids
        self.reasons = reasons

    def __str__(self) -> str:
        first = min(self.reasons)
        return (
            f"{len(self.reasons)} of {len(self.job_ids)} submissions rejected; "
            f"the first (#{first}): {self.reasons[first]}"
        )


class NotFound(TaskyardError):
    """The coordinator does not know the job (expired or never existed)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found (expired or never existed)")
        self.job_id = job_id


class JobFailed(TaskyardError):
    """The job waited for ended FAILED or CANCELLED; ``job`` is its final view."""

    def __init__(self, job: JobView) -> None:
        detail = f": {job.error}" if job.error else ""
        super().__init__(f"job {job.job_id} ended {job.state}{detail}")
        self.job = job


class Timeout(TaskyardError):
    """The wait ended before the job did; ``job`` is the last view seen."""

    def __init__(self, job: JobView, seconds: float) -> None:
        super().__init__(
            f"timed out after {seconds:g} s waiting for job {job.job_id}; it is still {job.state}"
        )
        self.job = job
