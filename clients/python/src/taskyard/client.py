"""The producer API: submit jobs, look at them, wait for them, control them.

```python
from taskyard import Client

with Client("127.0.0.1:7400") as client:
    job_id = client.submit("resize", {"url": "https://example.com/a.png"})
    job = client.wait(job_id, timeout=60)
    print(job.result_json())
```

A ``Client`` holds one connection, opened by the constructor and reopened
by the next call after it is lost. It is thread-safe: a lock serializes
calls, so threads share the one connection (give each thread its own
``Client`` for parallel throughput). It is not safe across ``fork``: make
a new one in the child.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from taskyard import wire
from taskyard.connection import (
    CONNECT_TIMEOUT,
    Addresses,
    FramedSocket,
    Security,
    closed_on_error,
    dial,
    handshake,
    parse_addresses,
)
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
    Unreachable,
)
from taskyard.views import JobSummary, JobView, WorkerView

Workers = list[WorkerView]

PRIORITIES = ("high", "normal", "low")
STATES = ("QUEUED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED")
MAX_LIST_JOBS = 1000
"""The most jobs one ``list`` returns, whatever ``limit`` asks (the coordinator's bound)."""
MAX_BATCH_SUBMISSIONS = (wire.DEFAULT_MAX_FRAME_BYTES - 1024) // (512 + 64)
"""Submissions per ``SubmitBatch`` frame: as many as a default coordinator's answer holds."""
MAX_BATCH_BYTES = wire.DEFAULT_MAX_FRAME_BYTES - 1024
"""Encoded bytes per ``SubmitBatch`` frame, so a default coordinator accepts it."""
PIPELINE_FRAMES = 8
"""``SubmitBatch`` frames ``submit_many`` keeps in flight (the coordinator's
``max-in-flight-requests`` defaults to 64)."""
PING_AFTER_IDLE = 30.0
FAILOVER_TIMEOUT = 20.0


@dataclass
class Submission:
    """One job for ``submit_many``; the fields mean what ``Client.submit``'s
    arguments mean."""

    task_type: str
    payload: Any = None
    priority: str = "normal"
    max_attempts: int | None = None
    timeout_ms: int | None = None
    delay: float | _dt.timedelta | None = None
    at: float | _dt.datetime | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None


def encode_payload(payload: Any) -> bytes:
    """A payload as the coordinator stores it: MessagePack of the value."""
    try:
        return wire.pack(payload)
    except (TypeError, ValueError, OverflowError) as e:
        raise Rejected(f"payload: cannot be encoded as MessagePack: {e}") from e


def _delay_ms(delay: float | _dt.timedelta | None, at: float | _dt.datetime | None) -> int | None:
    if delay is not None and at is not None:
        raise Rejected("delay: give delay or at, not both")
    if delay is not None:
        seconds = delay.total_seconds() if isinstance(delay, _dt.timedelta) else float(delay)
        if seconds < 0:
            raise Rejected(f"delay: must not be negative, got {seconds:g} s")
        return round(seconds * 1000)
    if at is not None:
        if isinstance(at, _dt.datetime):
            if at.tzinfo is None:
                raise Rejected("at: give a timezone-aware datetime (e.g. with tzinfo=timezone.utc)")
            when = at.timestamp()
        else:
            when = float(at)
        return max(0, round((when - time.time()) * 1000))
    return None


def _submission(s: Submission) -> dict[str, Any]:
    if s.priority not in PRIORITIES:
        raise Rejected(f"priority: unknown level {s.priority!r} (expected high, normal or low)")
    return wire.submission(
        s.task_type,
        encode_payload(s.payload),
        s.priority,
        s.max_attempts,
        s.timeout_ms,
        s.idempotency_key,
        _delay_ms(s.delay, s.at),
        s.concurrency_key,
    )


class Client:
    """A connection to the coordinator's client listener.

    ``addresses``: ``"host:port"``, a comma-separated list or a list (every
    coordinator of a high-availability group; the client finds the leader).
    ``token``: the coordinator's ``client-token``. ``tls_ca``: a PEM file of
    the CA that signed the coordinator's certificate (TLS when given).
    ``timeout``: how long one answer may take before the call raises
    ``Unreachable``.
    """

    def __init__(
        self,
        addresses: Addresses = "127.0.0.1:7400",
        token: str | None = None,
        tls_ca: str | None = None,
        timeout: float = 30.0,
        *,
        tls_server_name: str | None = None,
        failover_timeout: float = FAILOVER_TIMEOUT,
        ping_after_idle: float = PING_AFTER_IDLE,
    ) -> None:
        self._addrs = parse_addresses(addresses)
        self._security = Security(token, tls_ca, tls_server_name)
        self._timeout = timeout
        self._failover_timeout = failover_timeout
        self._ping_after_idle = ping_after_idle
        self._lock = threading.RLock()
        self._conn: FramedSocket | None = None
        self._start = 0
        self._next_id = 1
        self._last_answer = time.monotonic()
        self._connect()

    # ------------------------------------------------------------ lifetime

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection; a later call opens a new one."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def addr(self) -> str:
        """The coordinator connected to (or last connected to)."""
        return self._conn.addr if self._conn is not None else self._addrs[self._start]

    def _connect(self) -> None:
        def attempt(addr: str) -> FramedSocket:
            conn = handshake(
                addr, "client", self._security, wire.CLIENT_MAX_FRAME_BYTES, CONNECT_TIMEOUT
            )
            conn.sock.settimeout(self._timeout)
            return conn

        self._conn, self._start = dial(self._addrs, self._start, self._failover_timeout, attempt)
        self._last_answer = time.monotonic()

    def _live(self) -> FramedSocket:
        if self._conn is None or self._conn.closed:
            self._connect()
        elif time.monotonic() - self._last_answer >= self._ping_after_idle:
            try:
                self._exchange("Ping")
            except Unreachable:
                self._connect()
        assert self._conn is not None
        return self._conn

    # ------------------------------------------------------------ requests

    def _take_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _answer(self, conn: FramedSocket, rid: int) -> tuple[str, Any]:
        """Reads the answer to request ``rid``."""
        with closed_on_error(conn):
            name, body = wire.variant(conn.receive())
        self._last_answer = time.monotonic()
        if name == "Response" and isinstance(body, dict):
            if body.get("request_id") != rid:
                conn.close()
                raise ProtocolMismatch(
                    f"answer to request {body.get('request_id')} while waiting for {rid}", conn.addr
                )
            kind, detail = wire.variant(body.get("response"))
            if kind == "Overloaded":
                raise Overloaded(f"coordinator overloaded: {detail.get('reason')}")
            if kind == "NotDurable":
                raise NotDurable(str(detail.get("reason")))
            if kind == "AnswerTooLarge":
                raise TaskyardError(
                    f"the answer ({detail.get('size')} bytes) does not fit the coordinator's "
                    f"max-frame-bytes ({detail.get('max')}); ask for less"
                )
            return kind, detail
        conn.close()
        if name == "Error" and isinstance(body, dict):
            raise Refused(f"coordinator refused: {body.get('message')}", conn.addr)
        raise ProtocolMismatch(f"{conn.addr}: unexpected {name}", conn.addr)

    def _exchange(self, request: Any) -> tuple[str, Any]:
        assert self._conn is not None
        conn = self._conn
        rid = self._take_id()
        conn.send(wire.frame(wire.request(rid, request)))
        return self._answer(conn, rid)

    def _call(self, request: Any, repeatable: bool = False) -> tuple[str, Any]:
        """Sends ``request`` on a live connection and returns its answer. A
        request answered by the idle-close ``Error`` (not run) is sent once
        more on a new connection; a ``repeatable`` one (keyed submissions)
        also after a lost connection, until the failover timeout."""
        with self._lock:
            deadline = time.monotonic() + self._failover_timeout
            resent = False
            while True:
                self._live()
                try:
                    return self._exchange(request)
                except Refused as e:
                    if not str(e).startswith(f"coordinator refused: {wire.IDLE_CLOSED}"):
                        raise
                    if resent and not repeatable:
                        raise
                    resent = True
                except Unreachable:
                    if not repeatable or time.monotonic() >= deadline:
                        raise
                self._conn = None

    # ------------------------------------------------------------ submit

    def submit(
        self,
        task_type: str,
        payload: Any = None,
        *,
        priority: str = "normal",
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        delay: float | _dt.timedelta | None = None,
        at: float | _dt.datetime | None = None,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
    ) -> str:
        """Submits one job and returns its id once it is durable.

        ``payload`` is any MessagePack-able value (dicts, lists, str, bytes,
        numbers). ``delay`` (seconds or a ``timedelta``) or ``at`` (a
        timezone-aware ``datetime`` or unix seconds) hold the job back.
        With ``idempotency_key`` a repeat returns the first job's id, and
        the submission is sent again if the connection is lost. With
        ``concurrency_key`` at most the limit set on the key (``[[limit]]``
        in the coordinator's config) of the jobs carrying it run at once.
        Raises ``Rejected`` (with ``field``) when the coordinator refuses it."""
        s = Submission(
            task_type,
            payload,
            priority,
            max_attempts,
            timeout_ms,
            delay,
            at,
            idempotency_key,
            concurrency_key,
        )
        kind, detail = self._call(
            {"Submit": _submission(s)}, repeatable=idempotency_key is not None
        )
        if kind != "Submitted":
            raise ProtocolMismatch(f"unexpected answer {kind} to Submit", self.addr)
        return _accepted(detail)

    def submit_many(self, jobs: Iterable[Submission | tuple[str, Any]]) -> list[str]:
        """Submits many jobs, pipelined in ``SubmitBatch`` frames; returns
        their ids in order. If any is rejected, raises ``BatchRejected``
        listing the ids of those accepted (they exist) and why the others
        were not. Frames whose every job has an idempotency key are sent
        again after a lost connection; otherwise a lost connection raises
        ``Unreachable`` (earlier frames' jobs exist)."""
        packed: list[bytes] = []
        keyed: list[bool] = []
        for job in jobs:
            s = job if isinstance(job, Submission) else Submission(job[0], job[1])
            packed.append(wire.pack(_submission(s)))
            keyed.append(s.idempotency_key is not None)
        frames: list[tuple[int, int]] = []  # (first index, end index)
        first, size = 0, 0
        for i, p in enumerate(packed):
            if i > first and (
                i - first >= MAX_BATCH_SUBMISSIONS or size + len(p) > MAX_BATCH_BYTES
            ):
                frames.append((first, i))
                first, size = i, 0
            size += len(p)
        if first < len(packed):
            frames.append((first, len(packed)))
        ids: list[str | None] = [None] * len(packed)
        reasons: dict[int, str] = {}
        with self._lock:
            todo = list(range(len(frames)))
            deadline = time.monotonic() + self._failover_timeout
            while todo:
                try:
                    self._pipeline(frames, todo, packed, ids, reasons)
                except Unreachable:
                    repeatable = all(all(keyed[a:b]) for a, b in (frames[f] for f in todo))
                    if not repeatable or time.monotonic() >= deadline:
                        raise
                    self._conn = None
        if reasons:
            raise BatchRejected(ids, reasons)
        return [i for i in ids if i is not None]

    def _pipeline(
        self,
        frames: list[tuple[int, int]],
        todo: list[int],
        packed: list[bytes],
        ids: list[str | None],
        reasons: dict[int, str],
    ) -> None:
        """Sends the frames ``todo`` names, at most ``PIPELINE_FRAMES`` in
        flight, and records their answers; removes each answered frame from
        ``todo``."""
        conn = self._live()
        in_flight: list[tuple[int, int]] = []  # (request id, frame index)
        queue = list(todo)
        while queue or in_flight:
            burst = []
            while queue and len(in_flight) < PIPELINE_FRAMES:
                f = queue.pop(0)
                rid = self._take_id()
                a, b = frames[f]
                body = wire.request_packed(rid, "SubmitBatch", wire.array_of_packed(packed[a:b]))
                burst.append(wire.frame_body(body))
                in_flight.append((rid, f))
            if burst:
                conn.send(b"".join(burst))
            rid, f = in_flight.pop(0)
            a, b = frames[f]
            try:
                kind, detail = self._answer(conn, rid)
            except Overloaded as e:
                for i in range(a, b):
                    reasons[i] = str(e)
                todo.remove(f)
                continue
            if kind != "BatchSubmitted" or not isinstance(detail, list) or len(detail) != b - a:
                conn.close()
                raise ProtocolMismatch(f"unexpected answer {kind} to SubmitBatch", conn.addr)
            for i, answer in zip(range(a, b), detail):
                try:
                    ids[i] = _accepted(answer)
                except Rejected as e:
                    reasons[i] = e.reason
            todo.remove(f)

    # ------------------------------------------------------------ look

    def status(self, job_id: str) -> JobView:
        """The job's current view; raises ``NotFound`` for an unknown job."""
        kind, detail = self._call({"Status": {"job_id": wire.id_bytes(job_id)}})
        if kind == "Job":
            return JobView.from_wire(detail)
        if kind == "NotFound":
            raise NotFound(job_id)
        raise ProtocolMismatch(f"unexpected answer {kind} to Status", self.addr)

    def wait(self, job_id: str, timeout: float | None = 60.0, poll: float = 0.2) -> JobView:
        """Waits for the job to finish and returns its final view (payload and
        result whole). Raises ``JobFailed`` if it ended FAILED or CANCELLED,
        ``Timeout`` if ``timeout`` seconds passed first (``None``: no limit),
        ``NotFound`` for an unknown job. Polls: first after 5 ms, doubling up
        to ``poll`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while True:
            job = self.status(job_id)
            if job.finished:
                job = self._complete(job)
                if job.state != "SUCCEEDED":
                    raise JobFailed(job)
                return job
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise Timeout(job, timeout or 0.0)
            time.sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, poll)

    def _complete(self, job: JobView) -> JobView:
        from dataclasses import replace

        if job.payload_omitted:
            job = replace(
                job, payload=self._read_bytes(job.job_id, "payload"), payload_omitted=False
            )
        if job.result_omitted:
            job = replace(job, result=self._read_bytes(job.job_id, "result"), result_omitted=False)
        return job

    def result(self, job_id: str) -> bytes:
        """The whole result of a SUCCEEDED job, read in chunks of what fits a
        frame. Raises ``NotFound``, or ``TaskyardError`` for a job without one."""
        return self._read_bytes(job_id, "result")

    def payload(self, job_id: str) -> bytes:
        """The whole payload (MessagePack bytes) of a job."""
        return self._read_bytes(job_id, "payload")

    def _read_bytes(self, job_id: str, field: str) -> bytes:
        raw = wire.id_bytes(job_id)
        out = bytearray()
        total: int | None = None
        while total is None or len(out) < total:
            request = {
                "ReadChunk": {
                    "job_id": raw,
                    "field": field,
                    "offset": len(out),
                    "max_bytes": 0xFFFFFFFF,
                }
            }
            kind, detail = self._call(request)
            if kind == "NotFound":
                raise NotFound(job_id)
            if kind == "ChunkRefused":
                raise TaskyardError(str(detail.get("reason")))
            if kind != "Chunk" or detail.get("offset") != len(out):
                raise ProtocolMismatch(f"unexpected answer {kind} to ReadChunk", self.addr)
            if total is not None and detail["total"] != total:
                raise TaskyardError(f"the {field} of job {job_id} changed while being read")
            total = int(detail["total"])
            chunk = bytes(detail["bytes"])
            if not chunk and len(out) < total:
                raise TaskyardError(f"the {field} of job {job_id} stopped at {len(out)} of {total}")
            out += chunk
        return bytes(out)

    def list(
        self,
        state: str | None = None,
        task_type: str | None = None,
        limit: int = 100,
    ) -> list[JobSummary]:
        """Summaries of at most ``limit`` jobs (at most ``MAX_LIST_JOBS``),
        newest first, of ``state`` (``"FAILED"``...) and ``task_type`` if
        given, following the coordinator's cursor across answers."""
        if state is not None and state.upper() not in STATES:
            raise Rejected(f"state: unknown state {state!r} (expected one of {', '.join(STATES)})")
        limit = max(0, min(limit, MAX_LIST_JOBS))
        jobs: list[JobSummary] = []
        cursor = None
        while len(jobs) < limit:
            request = {
                "List": {
                    "state": None if state is None else state.upper(),
                    "limit": limit - len(jobs),
                    "task_type": task_type,
                    "cursor": cursor,
                }
            }
            kind, page = self._call(request)
            if kind != "Jobs":
                raise ProtocolMismatch(f"unexpected answer {kind} to List", self.addr)
            got = [JobSummary.from_wire(j) for j in page.get("jobs") or []]
            jobs.extend(got)
            cursor = page.get("next")
            if not got or cursor is None:
                break
        return jobs[:limit]

    def counts(self, task_type: str | None = None) -> dict[str, int]:
        """How many jobs are in each state (of ``task_type``, if given),
        including those only the database still holds."""
        request = {"List": {"state": None, "limit": 0, "task_type": task_type, "cursor": None}}
        kind, page = self._call(request)
        if kind != "Jobs":
            raise ProtocolMismatch(f"unexpected answer {kind} to List", self.addr)
        return {c["state"]: int(c["count"]) for c in page.get("counts") or []}

    def workers(self) -> Workers:
        """Every worker connected to the coordinator."""
        kind, detail = self._call("Workers")
        if kind != "Workers":
            raise ProtocolMismatch(f"unexpected answer {kind} to Workers", self.addr)
        return [WorkerView.from_wire(w) for w in detail]

    # ------------------------------------------------------------ control

    def cancel(self, job_id: str) -> bool:
        """Cancels the job: at once if it waits; a running one's worker is told
        to stop. True if it is CANCELLED now, False if it had already finished
        (nothing changed). Raises ``NotFound``."""
        kind, _ = self._call({"Cancel": {"job_id": wire.id_bytes(job_id)}})
        if kind == "Job":
            return True
        if kind == "CancelRefused":
            return False
        if kind == "NotFound":
            raise NotFound(job_id)
        raise ProtocolMismatch(f"unexpected answer {kind} to Cancel", self.addr)

    def retry(self, job_id: str) -> None:
        """Puts a FAILED or CANCELLED job back in the queue with a fresh
        attempt budget. Raises ``Rejected`` (with the reason) for a job in
        another state, ``NotFound`` for an unknown one."""
        kind, detail = self._call({"Requeue": {"job_id": wire.id_bytes(job_id)}})
        if kind == "Requeued":
            return
        if kind == "RequeueRefused":
            raise Rejected(str(detail.get("reason")))
        if kind == "NotFound":
            raise NotFound(job_id)
        raise ProtocolMismatch(f"unexpected answer {kind} to Requeue", self.addr)

    def ping(self) -> None:
        """Checks that the coordinator answers (and keeps an idle connection open)."""
        kind, _ = self._call("Ping")
        if kind != "Pong":
            raise ProtocolMismatch(f"unexpected answer {kind} to Ping", self.addr)


def _accepted(answer: Any) -> str:
    kind, detail = wire.variant(answer)
    if kind == "Accepted":
        return wire.id_text(detail["job_id"])
    if kind == "Rejected":
        raise Rejected(str(detail.get("reason")))
    raise TaskyardError(f"unexpected submit answer {kind}")


__all__ = ["Client", "Submission", "encode_payload"]
