"""What the coordinator answers with: jobs, their attempts and progress, workers.

Times are unix milliseconds (as on the wire); ids are UUID text. Fields a
newer coordinator adds are ignored; fields an older one leaves out default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgpack

from taskyard.wire import id_text


def _opt_id(raw: Any) -> str | None:
    return None if raw is None else id_text(raw)


def _shared(d: dict[str, Any]) -> dict[str, Any]:
    """The fields a ``JobView`` and a ``JobSummary`` both have."""
    return {
        "job_id": id_text(d["job_id"]),
        "task_type": d["task_type"],
        "state": d["state"],
        "priority": d["priority"],
        "attempts": d["attempts"],
        "max_attempts": d["max_attempts"],
        "submitted_at": d["submitted_at"],
        "updated_at": d["updated_at"],
        "schedule": d.get("schedule"),
        "schedule_slot": d.get("schedule_slot"),
    }


@dataclass(frozen=True)
class Progress:
    """The latest progress a running attempt reported."""

    percent: int
    message: str
    at: int

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Progress:
        return cls(percent=d["percent"], message=d["message"], at=d["at"])


@dataclass(frozen=True)
class Attempt:
    """One run of a job. ``outcome`` is ``None`` while it runs, else a dict
    with ``kind`` (``succeeded``, ``failed``, ``timed_out``, ``worker_lost``,
    ``cancelled``, ``interrupted``) and that kind's detail."""

    number: int
    worker_id: str
    lease: str
    started_at: int
    ended_at: int | None
    outcome: dict[str, Any] | None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Attempt:
        return cls(
            number=d["number"],
            worker_id=d["worker_id"],
            lease=id_text(d["lease"]),
            started_at=d["started_at"],
            ended_at=d.get("ended_at"),
            outcome=d.get("outcome"),
        )


@dataclass(frozen=True)
class JobView:
    """One job as ``status`` and ``wait`` return it. ``payload`` and
    ``result`` are the raw bytes (``None`` when left out to fit a frame, see
    ``payload_omitted``/``result_omitted``; ``wait`` fills them in).

    ``idempotency_key`` is the key the job was submitted with; ``schedule``
    names the schedule that submitted it (read off that key) and
    ``schedule_slot`` its slot, ``None`` for a manual trigger;
    ``key_omitted`` says the three were left out to fit the smallest frames.
    ``concurrency_key`` is the job's concurrency key; ``waiting`` says why a
    ready ``QUEUED`` job does not start (its key's limit is reached).
    ``effective_level`` is the base level raised by aging only while the job
    is ``QUEUED``; in any other state it is the base level."""

    job_id: str
    task_type: str
    state: str
    priority: str
    attempts: int
    max_attempts: int
    timeout_ms: int
    submitted_at: int
    updated_at: int
    payload: bytes | None = None
    result: bytes | None = None
    error: str | None = None
    worker_id: str | None = None
    lease: str | None = None
    next_retry_at: int | None = None
    not_before: int | None = None
    no_worker: bool = False
    effective_level: int = 0
    sequence: int = 0
    history: list[Attempt] = field(default_factory=list)
    progress: Progress | None = None
    payload_bytes: int = 0
    payload_omitted: bool = False
    result_bytes: int | None = None
    result_omitted: bool = False
    history_omitted: int = 0
    idempotency_key: str | None = None
    schedule: str | None = None
    schedule_slot: int | None = None
    key_omitted: bool = False
    concurrency_key: str | None = None
    waiting: str | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> JobView:
        progress = d.get("progress")
        payload_omitted = bool(d.get("payload_omitted", False))
        return cls(
            **_shared(d),
            timeout_ms=d["timeout_ms"],
            payload=None if payload_omitted else bytes(d.get("payload") or b""),
            result=None if d.get("result") is None else bytes(d["result"]),
            error=d.get("error"),
            worker_id=d.get("worker_id"),
            lease=_opt_id(d.get("lease")),
            next_retry_at=d.get("next_retry_at"),
            not_before=d.get("not_before"),
            no_worker=bool(d.get("no_worker", False)),
            effective_level=d.get("effective_level", 0),
            sequence=d.get("sequence", 0),
            history=[Attempt.from_wire(a) for a in d.get("history") or []],
            progress=None if progress is None else Progress.from_wire(progress),
            payload_bytes=d.get("payload_bytes", 0),
            payload_omitted=payload_omitted,
            result_bytes=d.get("result_bytes"),
            result_omitted=bool(d.get("result_omitted", False)),
            history_omitted=d.get("history_omitted", 0),
            idempotency_key=d.get("idempotency_key"),
            key_omitted=bool(d.get("key_omitted", False)),
            concurrency_key=d.get("concurrency_key"),
            waiting=d.get("waiting"),
        )

    @property
    def finished(self) -> bool:
        """SUCCEEDED, FAILED or CANCELLED: the job will not change by itself."""
        return self.state in ("SUCCEEDED", "FAILED", "CANCELLED")

    def payload_value(self) -> Any:
        """The payload decoded from MessagePack."""
        if self.payload is None:
            raise ValueError(f"the payload of job {self.job_id} was left out; use Client.payload")
        return msgpack.unpackb(self.payload, raw=False)

    def result_text(self) -> str:
        """The result as UTF-8 text."""
        return (self.result or b"").decode()

    def result_json(self) -> Any:
        """The result parsed as JSON (what a handler returning a dict or list sent)."""
        return json.loads(self.result or b"null")


@dataclass(frozen=True)
class JobSummary:
    """One job in a ``list``: no payload, result or history; its schedule
    and slot as in ``JobView`` (the idempotency key is in ``status``)."""

    job_id: str
    task_type: str
    state: str
    priority: str
    attempts: int
    max_attempts: int
    submitted_at: int
    updated_at: int
    worker_id: str | None
    error: str | None
    progress_percent: int | None
    payload_bytes: int
    result_bytes: int | None
    sequence: int
    schedule: str | None = None
    schedule_slot: int | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> JobSummary:
        return cls(
            **_shared(d),
            worker_id=d.get("worker_id"),
            error=d.get("error"),
            progress_percent=d.get("progress_percent"),
            payload_bytes=d.get("payload_bytes", 0),
            result_bytes=d.get("result_bytes"),
            sequence=d.get("sequence", 0),
        )


@dataclass(frozen=True)
class WorkerView:
    """One connected worker."""

    worker_id: str
    capacity: int
    active: int
    task_types: list[str]
    registered_at: int
    last_heartbeat_at: int
    draining: bool

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> WorkerView:
        return cls(
            worker_id=d["worker_id"],
            capacity=d["capacity"],
            active=d["active"],
            task_types=list(d["task_types"]),
            registered_at=d["registered_at"],
            last_heartbeat_at=d["last_heartbeat_at"],
            draining=bool(d.get("draining", False)),
        )
