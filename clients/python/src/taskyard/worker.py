"""The worker API: run task handlers for a coordinator.

```python
from taskyard import Worker, TaskContext, Retryable

worker = Worker("127.0.0.1:7401", capacity=8)

@worker.task("resize")
def resize(ctx: TaskContext) -> dict:
    ctx.report_progress(50, "resizing")
    if ctx.cancelled.is_set():
        raise Retryable("stopped")
    return {"width": ctx.payload["width"] // 2}

worker.run()  # until SIGTERM/SIGINT, then drains
```

Threads: ``run`` reads frames on the calling thread; handlers run on a
pool of ``capacity`` threads; a heartbeat thread sends ``Heartbeat`` every
``heartbeat_interval`` seconds. Every frame is written whole under a lock
held only for the ``sendall`` (never while a handler runs), so a busy or
CPU-bound handler cannot hold up a heartbeat: Python switches threads at
least every ``sys.getswitchinterval()`` (5 ms) even in a pure-Python loop.
A C extension that holds the GIL for seconds can still starve it; run such
work in a subprocess.

A lost connection does not stop running handlers: their results wait and
are written after the next registration, whose ``Register`` lists the
(job, lease) pairs still held so the coordinator keeps them. Reconnects
back off from 0.1 s, doubling up to ``reconnect_max``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable

import msgpack

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
from taskyard.errors import ProtocolMismatch, Refused, Rejected, Unauthorized, Unreachable

log = logging.getLogger("taskyard.worker")

HEARTBEAT_FRAME = wire.frame(wire.HEARTBEAT)
DRAINING_FRAME = wire.frame(wire.DRAINING)
FIRST_BACKOFF = 0.1
PROGRESS_EVERY = 0.1
"""Shortest pause between two progress frames of one attempt; a report in
between is kept and sent later (by the heartbeat thread at the latest)."""
CLEANUP_TIMEOUT = 5.0
"""How long handlers cancelled at the drain timeout get to return."""

Handler = Callable[["TaskContext"], Any]
_UNDECODED = object()


class Retryable(Exception):
    """Raise from a handler: the attempt failed, another may succeed; the job
    is retried while its attempt budget lasts (any other exception too)."""


class Permanent(Exception):
    """Raise from a handler: every attempt would fail the same way (a bad
    payload); the job FAILS at once without retries."""


class TaskContext:
    """What a handler gets: the attempt's identity, payload and deadline, a way
    to report progress, and ``cancelled``, an event set when the coordinator
    cancels the attempt, its deadline passes, or the worker's drain times out.
    A handler that sees it set should return soon; its result is dropped."""

    __slots__ = (
        "_job",
        "_lease",
        "_payload",
        "_progress_at",
        "_progress_pending",
        "_worker",
        "attempt",
        "cancelled",
        "deadline",
        "raw_payload",
        "task_type",
    )

    def __init__(
        self,
        worker: Worker,
        job: bytes,
        lease: bytes,
        task_type: str,
        raw_payload: bytes,
        timeout_ms: int,
        attempt: int,
    ) -> None:
        self._worker = worker
        self._job = job
        self._lease = lease
        self.task_type = task_type
        self.raw_payload = raw_payload
        self.attempt = attempt
        """1 for the first run, 2 for the first retry (0 from an older coordinator)."""
        self.deadline = time.monotonic() + timeout_ms / 1000.0
        """When the coordinator gives up on this attempt, on ``time.monotonic()``'s clock."""
        self.cancelled = threading.Event()
        self._payload: Any = _UNDECODED
        self._progress_at = 0.0
        self._progress_pending: tuple[int, str] | None = None

    @property
    def job_id(self) -> str:
        return wire.id_text(self._job)

    @property
    def lease(self) -> str:
        return wire.id_text(self._lease)

    @property
    def payload(self) -> Any:
        """The payload, decoded from MessagePack (what the producer passed);
        decoded once, on first use."""
        if self._payload is _UNDECODED:
            self._payload = msgpack.unpackb(self.raw_payload, raw=False)
        return self._payload

    def time_left(self) -> float:
        """Seconds until ``deadline`` (negative once it has passed)."""
        return self.deadline - time.monotonic()

    def report_progress(self, percent: int, message: str = "") -> None:
        """Tells the coordinator how far the attempt has got (0 to 100) and what
        it is doing; ``taskyard status`` shows the latest. Cheap to call often:
        at most one frame per ``PROGRESS_EVERY`` seconds is sent."""
        if not isinstance(percent, int) or not 0 <= percent <= 100:
            raise ValueError(f"percent: expected an integer from 0 to 100, got {percent!r}")
        now = time.monotonic()
        if now - self._progress_at < PROGRESS_EVERY:
            self._progress_pending = (percent, message)
            return
        self._progress_at = now
        self._progress_pending = None
        self._worker._send_progress(self, percent, message)

    def _flush_progress(self) -> None:
        pending = self._progress_pending
        if pending is not None:
            self._progress_pending = None
            self._progress_at = time.monotonic()
            self._worker._send_progress(self, *pending)


class _Attempt:
    """One assignment the worker holds: running, or finished with its result
    not yet written."""

    __slots__ = ("ctx", "handler", "key", "result")

    def __init__(self, key: tuple[bytes, bytes], ctx: TaskContext, handler: Handler) -> None:
        self.key = key
        self.ctx = ctx
        self.handler = handler
        self.result: bytes | None = None


def encode_result(value: Any) -> bytes:
    """A handler's return value as result bytes: bytes as they are, ``str`` as
    UTF-8, ``None`` as empty, anything else as compact JSON."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


class Worker:
    """Runs handlers for the task types registered with ``task``.

    ``addresses``: the coordinator's worker listener (``host:port``, a
    comma-separated list or a list for a high-availability group).
    ``capacity``: attempts run at once (the pool's threads). ``prefetch``:
    attempts accepted beyond that, each waiting in the worker for a thread
    (the worker registers ``capacity + prefetch`` slots, so a thread that
    frees starts its next job without waiting for the coordinator; a
    waiting attempt's timeout runs while it waits). ``token``: the
    coordinator's ``worker-token``. ``tls_ca``: PEM file of the CA that
    signed the coordinator's certificate. ``worker_id``: defaults to
    ``HOST-py-PID``. ``drain_timeout``: how long running attempts may take
    to finish after SIGTERM/SIGINT or ``drain()``.
    """

    def __init__(
        self,
        addresses: Addresses = "127.0.0.1:7401",
        capacity: int = 8,
        token: str | None = None,
        tls_ca: str | None = None,
        worker_id: str | None = None,
        *,
        tls_server_name: str | None = None,
        heartbeat_interval: float = 2.0,
        coordinator_timeout: float = 6.0,
        drain_timeout: float = 30.0,
        reconnect_max: float = 5.0,
        max_frame_bytes: int = wire.DEFAULT_MAX_FRAME_BYTES,
        prefetch: int = 0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: must be at least 1, got {capacity}")
        if not 0 <= prefetch <= 10_000:
            raise ValueError(f"prefetch: {prefetch} is outside 0..=10000")
        if coordinator_timeout <= heartbeat_interval:
            raise ValueError(
                f"coordinator_timeout ({coordinator_timeout} s) must be longer than "
                f"heartbeat_interval ({heartbeat_interval} s)"
            )
        self._addrs = parse_addresses(addresses)
        self._security = Security(token, tls_ca, tls_server_name)
        self.capacity = capacity
        self.prefetch = prefetch
        self.slots = capacity + prefetch
        """What the worker registers: attempts it holds at once, running or waiting."""
        self.worker_id = worker_id or f"{socket.gethostname()}-py-{os.getpid()}"
        self.heartbeat_interval = heartbeat_interval
        self.coordinator_timeout = coordinator_timeout
        self.drain_timeout = drain_timeout
        self.reconnect_max = reconnect_max
        self.max_frame_bytes = max_frame_bytes
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._held: dict[tuple[bytes, bytes], _Attempt] = {}
        self._active = 0
        self._queue: queue.SimpleQueue[_Attempt | None] = queue.SimpleQueue()
        self._link: FramedSocket | None = None
        self._epoch = 0
        self._start = 0
        self._drain_requested = threading.Event()
        self._draining = threading.Event()
        self._stopping = threading.Event()
        self.registered = threading.Event()
        """Set while a registered connection is up (tests and probes wait on it)."""

    # ------------------------------------------------------------ handlers

    def task(self, name: str) -> Callable[[Handler], Handler]:
        """Registers the decorated function as the handler of task type ``name``."""

        def register(fn: Handler) -> Handler:
            self.add_task(name, fn)
            return fn

        return register

    def add_task(self, name: str, handler: Handler) -> None:
        """``task`` without the decorator."""
        if not name or len(name) > 64:
            raise ValueError(f"task type {name!r}: must be 1 to 64 characters long")
        if any(not (c.isascii() and (c.isalnum() or c in "_-.:")) for c in name):
            raise ValueError(f"task type {name!r}: use letters, digits, '_', '-', '.' or ':'")
        self._handlers[name] = handler

    # ------------------------------------------------------------ control

    def drain(self) -> None:
        """Begins a graceful stop (what SIGTERM does): no new attempts, the
        running ones get ``drain_timeout`` to finish, then ``run`` returns."""
        self._drain_requested.set()

    def stop(self) -> None:
        """Stops at once: ``run`` returns, running attempts' results are dropped
        (the coordinator retries them elsewhere)."""
        self._stopping.set()
        link = self._link
        if link is not None:
            link.close()

    @property
    def in_flight(self) -> int:
        """Handlers running now."""
        with self._lock:
            return self._active

    # ------------------------------------------------------------ run

    def describe(self) -> str:
        """One line saying what this worker serves: its id, the coordinator
        address(es), its task types and its capacity."""
        slots = f"capacity {self.capacity}"
        if self.prefetch:
            slots += f", prefetch {self.prefetch}"
        return (
            f"taskyard worker {self.worker_id}: serving {', '.join(sorted(self._handlers))} "
            f"for coordinator {','.join(self._addrs)} ({slots})"
        )

    def run(self, install_signal_handlers: bool = True, announce: bool = True) -> None:
        """Connects, registers and runs assignments until stopped. First, with
        ``announce``, it prints ``describe()`` to stderr (one line, whatever
        the logging setup). SIGTERM or SIGINT (when called on the main thread
        with ``install_signal_handlers``) drains; a second one stops at once.
        Raises ``Unauthorized`` for a wrong token, ``ProtocolMismatch`` for a
        coordinator this package cannot speak to (TLS, protocol version, its
        client port) and ``Rejected`` for a registration it refuses (capacity
        over its ``max-worker-capacity``, too many task types), as the Rust
        worker exits on them; other failures are retried."""
        if not self._handlers:
            raise ValueError("no task handlers: register one with @worker.task(name)")
        if announce:
            print(self.describe(), file=sys.stderr, flush=True)
        previous = self._install_signals() if install_signal_handlers else {}
        threads = [
            threading.Thread(target=self._pool_thread, name=f"taskyard-task-{i}", daemon=True)
            for i in range(self.capacity)
        ]
        threads.append(
            threading.Thread(target=self._heartbeat_thread, name="taskyard-heartbeat", daemon=True)
        )
        threads.append(
            threading.Thread(target=self._drain_thread, name="taskyard-drain", daemon=True)
        )
        for t in threads:
            t.start()
        try:
            self._connect_loop()
        finally:
            self._stopping.set()
            link, self._link = self._link, None
            self.registered.clear()
            if link is not None:
                link.close()
            for _ in range(self.capacity):
                self._queue.put(None)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            log.info("worker stopped", extra={"worker_id": self.worker_id})

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self._drain_requested.is_set():
                log.warning("second signal: stopping without waiting")
                self.stop()
            else:
                self.drain()

        previous: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
        return previous

    def _connect_loop(self) -> None:
        backoff = FIRST_BACKOFF
        while not self._stopping.is_set():
            try:
                link, self._start = dial(self._addrs, self._start, 0.0, self._register)
            except (Unauthorized, ProtocolMismatch, Rejected):
                raise
            except Unreachable as e:
                log.warning(
                    "cannot register with a coordinator: %s; retrying in %.1f s", e, backoff
                )
                if self._stopping.wait(backoff):
                    return
                backoff = min(backoff * 2, self.reconnect_max)
                continue
            backoff = FIRST_BACKOFF
            self._serve(link)

    def _register(self, addr: str) -> FramedSocket:
        """Hello, Register (listing the attempts still held) and Registered at ``addr``."""
        link = handshake(addr, "worker", self._security, self.max_frame_bytes, CONNECT_TIMEOUT)
        with closed_on_error(link):
            with self._lock:
                running = list(self._held)[: self.slots]
            link.send(
                wire.frame(
                    wire.register(self.worker_id, self.slots, sorted(self._handlers), running)
                )
            )
            while True:
                name, body = wire.variant(link.receive())
                if name == "Registered":
                    epoch = int(body.get("epoch", 0))
                    if epoch < self._epoch:
                        raise Unreachable(
                            f"coordinator at {addr} leads epoch {epoch}, older than epoch "
                            f"{self._epoch} seen before",
                            addr,
                        )
                    self._epoch = epoch
                    break
                if name == "Error":
                    message = str(body.get("message", "")) if isinstance(body, dict) else ""
                    if message.startswith(wire.REGISTRATION_REFUSED):
                        raise Rejected(f"coordinator at {addr}: {message}")
                    raise Refused(f"coordinator at {addr} refused: {message}", addr)
                log.warning("unexpected %s before Registered ignored", name)
        link.sock.settimeout(self.coordinator_timeout)
        log.info(
            "registered with %s (%d slots, %d claims, epoch %d)",
            addr,
            self.slots,
            len(running),
            self._epoch,
        )
        return link

    def _serve(self, link: FramedSocket) -> None:
        """Reads one registered connection's frames until it ends."""
        self._link = link
        self.registered.set()
        try:
            with self._lock:
                held = [(a.key, a.result) for a in self._held.values() if a.result is not None]
            for key, result in held:
                self._write_result(link, key, result)
            if self._draining.is_set():
                link.send(DRAINING_FRAME)
            last = time.monotonic()
            while not self._stopping.is_set() and not link.closed:
                # Frames that came with Registered (or with the last read)
                # are already buffered: the socket would not report them.
                message = link.next_frame()
                if message is not None:
                    self._dispatch(link, message)
                    continue
                if not link.readable(0.2):
                    if time.monotonic() - last > self.coordinator_timeout:
                        log.warning(
                            "coordinator %s silent for %.1f s (heartbeats unanswered); leaving it",
                            link.addr,
                            self.coordinator_timeout,
                        )
                        # Try the others first: a paused coordinator's kernel still accepts.
                        self._start = (self._start + 1) % len(self._addrs)
                        break
                    continue
                link.fill()
                last = time.monotonic()
        except Unreachable as e:
            if not self._stopping.is_set():
                log.warning("connection to %s ended: %s", link.addr, e)
        finally:
            self.registered.clear()
            self._link = None
            link.close()

    def _dispatch(self, link: FramedSocket, message: Any) -> None:
        name, body = wire.variant(message)
        if name == "HeartbeatAck":
            return
        if name in ("TaskAssign", "TaskCancel"):
            epoch = int(body.get("epoch", 0))
            if epoch < self._epoch:
                log.warning("%s of epoch %d (older than %d) ignored", name, epoch, self._epoch)
                return
            self._epoch = epoch
            if name == "TaskAssign":
                self._assign(link, body)
            else:
                self._cancel((bytes(body["job_id"]), bytes(body["lease"])))
        elif name == "Error":
            log.error("coordinator %s closes the connection: %s", link.addr, body.get("message"))
            link.close()
        else:
            log.warning("unexpected %s ignored", name)

    def _assign(self, link: FramedSocket, body: dict[str, Any]) -> None:
        job, lease = bytes(body["job_id"]), bytes(body["lease"])
        task_type = body["task_type"]
        handler = self._handlers.get(task_type)
        why = None
        with self._lock:
            if self._draining.is_set():
                why = "is draining"
            elif len(self._held) >= self.slots:
                why = f"has all {self.slots} slots taken"
            elif handler is None:
                why = f"has no handler for {task_type!r}"
            else:
                ctx = TaskContext(
                    self,
                    job,
                    lease,
                    task_type,
                    bytes(body["payload"]),
                    int(body["timeout_ms"]),
                    int(body.get("attempt", 0)),
                )
                attempt = _Attempt((job, lease), ctx, handler)
                self._held[attempt.key] = attempt
                self._active += 1
        if why is None:
            self._queue.put(attempt)
            return
        log.debug("assignment refused: worker %s", why)
        refusal = wire.task_failed(job, lease, f"worker {self.worker_id} {why}", True)
        with contextlib.suppress(Unreachable):
            link.send(wire.frame(refusal))

    def _cancel(self, key: tuple[bytes, bytes]) -> None:
        with self._lock:
            attempt = self._held.pop(key, None)
        if attempt is not None:
            attempt.ctx.cancelled.set()

    # ------------------------------------------------------------ threads

    def _pool_thread(self) -> None:
        while True:
            attempt = self._queue.get()
            if attempt is None:
                return
            ctx = attempt.ctx
            try:
                frame = None if ctx.cancelled.is_set() else wire.frame(self._outcome(attempt))
            except BaseException as e:
                frame = wire.frame(
                    wire.task_failed(ctx._job, ctx._lease, f"{type(e).__name__}: {e}", True)
                )
            if ctx.cancelled.is_set():
                frame = None  # cancelled, past its deadline or drained: no result
            self._finish(attempt, frame)

    def _outcome(self, attempt: _Attempt) -> dict[str, Any]:
        ctx = attempt.ctx
        try:
            value = attempt.handler(ctx)
        except Permanent as e:
            return wire.task_failed(ctx._job, ctx._lease, str(e) or "Permanent", False)
        except Retryable as e:
            return wire.task_failed(ctx._job, ctx._lease, str(e) or "Retryable", True)
        except Exception as e:
            return wire.task_failed(ctx._job, ctx._lease, f"{type(e).__name__}: {e}", True)
        try:
            result = encode_result(value)
        except (TypeError, ValueError) as e:
            return wire.task_failed(
                ctx._job, ctx._lease, f"result: cannot be encoded as JSON: {e}", False
            )
        return wire.task_succeeded(ctx._job, ctx._lease, result)

    def _finish(self, attempt: _Attempt, frame: bytes | None) -> None:
        with self._lock:
            held = self._held.get(attempt.key) is attempt
            if held and frame is not None:
                attempt.result = frame
            elif held:
                del self._held[attempt.key]
            link = self._link
        if held and frame is not None and link is not None:
            self._write_result(link, attempt.key, frame)
        # Counted until written, so a drain does not close the connection first.
        with self._lock:
            self._active -= 1
            self._idle.notify_all()

    def _write_result(self, link: FramedSocket, key: tuple[bytes, bytes], frame: bytes) -> None:
        """Writes a held result; once written, the attempt is no longer held."""
        try:
            link.send(frame)
        except Unreachable:
            return  # held: written after the next registration
        with self._lock:
            attempt = self._held.get(key)
            if attempt is not None and attempt.result is frame:
                del self._held[key]

    def _send_progress(self, ctx: TaskContext, percent: int, message: str) -> None:
        link = self._link
        if link is None or ctx.cancelled.is_set():
            return
        with contextlib.suppress(Unreachable):
            link.send(wire.frame(wire.task_progress(ctx._job, ctx._lease, percent, message)))

    def _heartbeat_thread(self) -> None:
        """Every ``heartbeat_interval``: a heartbeat, late progress, and the
        ``cancelled`` event of attempts past their deadline."""
        while not self._stopping.wait(self.heartbeat_interval):
            link = self._link
            if link is not None:
                with contextlib.suppress(Unreachable):
                    link.send(HEARTBEAT_FRAME)
            now = time.monotonic()
            with self._lock:
                running = [a.ctx for a in self._held.values() if a.result is None]
            for ctx in running:
                ctx._flush_progress()
                if now > ctx.deadline:
                    ctx.cancelled.set()

    def _drain_thread(self) -> None:
        while not self._drain_requested.wait(0.5):
            if self._stopping.is_set():
                return
        with self._lock:
            self._draining.set()
            active = self._active
        log.info("draining: %d attempts running, timeout %.1f s", active, self.drain_timeout)
        link = self._link
        if link is not None:
            with contextlib.suppress(Unreachable):
                link.send(DRAINING_FRAME)
        if not self._wait_idle(self.drain_timeout):
            with self._lock:
                running = [a.ctx for a in self._held.values()]
            log.warning("drain timeout: cancelling %d attempts still running", len(running))
            for ctx in running:
                ctx.cancelled.set()
            self._wait_idle(CLEANUP_TIMEOUT)
        else:
            log.info("drained: every running attempt finished")
        self.stop()

    def _wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._active > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True
