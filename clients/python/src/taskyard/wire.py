"""The wire format: frames, and the MessagePack shape of every message.

A frame is a 4-byte big-endian length and then that many bytes of
MessagePack. Messages are Rust enums encoded the way ``rmp_serde`` writes
them: a variant without fields is its name as a string (``"Heartbeat"``);
any other is a one-entry map from its name to its body (``{"Status":
{"job_id": ...}}``); struct bodies are maps with named fields, in the
order the Rust types declare them. Job ids and leases are UUIDs sent as
16-byte ``bin``; payloads and results are ``bin``. The builders below write
exactly the bytes the Rust peers write (``tests/golden/frames/`` holds
one example of each message, checked by this package's tests).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import msgpack

PROTOCOL_VERSION = 3
"""Peers of different versions refuse each other in the ``Hello`` exchange."""

UNAUTHORIZED = "unauthorized"
"""The ``Error`` message of a coordinator refusing a missing or wrong token."""

VERSION_MISMATCH = "protocol version mismatch"
"""How the ``Error`` refusing a peer of another protocol version begins."""

WRONG_LISTENER = "wrong listener"
"""How the ``Error`` refusing a peer on the other role's port begins."""

REGISTRATION_REFUSED = "registration refused"
"""How the ``Error`` refusing a worker's ``Register`` begins (the reason follows)."""

IDLE_CLOSED = "idle connection closed"
"""How the ``Error`` closing an idle client connection begins."""

DEFAULT_MAX_FRAME_BYTES = 1024 * 1024
"""The coordinator's default ``max-frame-bytes``."""

CLIENT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest frame this package accepts (as the Rust client does)."""

HEADER = struct.Struct(">I")

HEARTBEAT = "Heartbeat"
DRAINING = "Draining"

TLS_PORT_HINT = "this port speaks TLS: pass tls_ca"
HTTP_CLIENT_PORT_HINT = (
    "this is an HTTP port; the client port is the one in client-listen (default 7400)"
)
HTTP_WORKER_PORT_HINT = (
    "this is an HTTP port; the worker port is the one in worker-listen (default 7401)"
)


class FrameError(Exception):
    """A frame that cannot be read: too large, cut off or not MessagePack."""


def pack(message: Any) -> bytes:
    """The MessagePack body of ``message`` (no length header)."""
    body: bytes = msgpack.packb(message, use_bin_type=True)
    return body


def frame(message: Any) -> bytes:
    """``message`` as one whole frame: length header, then body."""
    body = pack(message)
    return HEADER.pack(len(body)) + body


def frame_body(body: bytes) -> bytes:
    """An already packed body as a whole frame."""
    return HEADER.pack(len(body)) + body


def unpack(body: bytes) -> Any:
    """Decodes one frame body."""
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise FrameError(f"malformed frame: {e}") from e


def foreign_server(header: bytes, role: str) -> str | None:
    """What an impossible first header says about the server that sent it."""
    if len(header) >= 2 and 0x14 <= header[0] <= 0x17 and header[1] == 0x03:
        return TLS_PORT_HINT
    if header[:4] == b"HTTP":
        return HTTP_CLIENT_PORT_HINT if role == "client" else HTTP_WORKER_PORT_HINT
    return None


def variant(message: Any) -> tuple[str, Any]:
    """A received enum value as ``(variant name, body)``; body ``None`` for a
    variant without fields."""
    if isinstance(message, str):
        return message, None
    if isinstance(message, dict) and len(message) == 1:
        ((name, body),) = message.items()
        if isinstance(name, str):
            return name, body
    raise FrameError(f"expected a message variant, got {message!r:.200}")


# ---------------------------------------------------------------- ids


def id_bytes(text: str) -> bytes:
    """A job id or lease as text (any form ``uuid.UUID`` reads) to its 16 bytes."""
    try:
        return uuid.UUID(text).bytes
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"job id {text!r} is not a UUID: {e}") from e


def id_text(raw: Any) -> str:
    """A job id or lease as received (16-byte ``bin``) to its canonical text."""
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        return str(uuid.UUID(bytes=bytes(raw)))
    if isinstance(raw, str):
        return str(uuid.UUID(raw))
    raise FrameError(f"expected a 16-byte id, got {raw!r:.80}")


# ---------------------------------------------------------------- both


def hello(role: str, token: str | None) -> dict[str, Any]:
    """The first frame a client (``role="client"``) or worker sends."""
    return {"Hello": {"protocol_version": PROTOCOL_VERSION, "role": role, "token": token}}


# ---------------------------------------------------------------- workers


def register(
    worker_id: str,
    capacity: int,
    task_types: list[str],
    running: list[tuple[bytes, bytes]],
) -> dict[str, Any]:
    """``Register``; ``running`` lists (job id, lease) pairs still held."""
    return {
        "Register": {
            "worker_id": worker_id,
            "capacity": capacity,
            "task_types": task_types,
            "running": [{"job_id": job, "lease": lease} for job, lease in running],
        }
    }


def task_succeeded(job_id: bytes, lease: bytes, result: bytes) -> dict[str, Any]:
    return {"TaskResult": {"job_id": job_id, "lease": lease, "outcome": {"Succeeded": result}}}


def task_failed(job_id: bytes, lease: bytes, error: str, retryable: bool) -> dict[str, Any]:
    return {
        "TaskResult": {
            "job_id": job_id,
            "lease": lease,
            "outcome": {"Failed": {"error": error, "retryable": retryable}},
        }
    }


def task_progress(job_id: bytes, lease: bytes, percent: int, message: str) -> dict[str, Any]:
    return {
        "TaskProgress": {
            "job_id": job_id,
            "lease": lease,
            "percent": percent,
            "message": message,
        }
    }


# ---------------------------------------------------------------- clients


def request(request_id: int, body: Any) -> dict[str, Any]:
    """``Request { request_id, request }``: answered by a ``Response`` with the same id."""
    return {"Request": {"request_id": request_id, "request": body}}


def submission(
    task_type: str,
    payload: bytes,
    priority: str = "normal",
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    idempotency_key: str | None = None,
    delay_ms: int | None = None,
    concurrency_key: str | None = None,
) -> dict[str, Any]:
    """One ``SubmitRequest``; ``payload`` is already MessagePack."""
    request: dict[str, Any] = {
        "task_type": task_type,
        "payload": payload,
        "priority": priority,
        "max_attempts": max_attempts,
        "timeout_ms": timeout_ms,
        "idempotency_key": idempotency_key,
        "delay_ms": delay_ms,
    }
    if concurrency_key is not None:
        request["concurrency_key"] = concurrency_key
    return request


def array_of_packed(items: list[bytes]) -> bytes:
    """A MessagePack array whose elements are already packed: lets a batch be
    sized by its encoded bytes before it is sent."""
    n = len(items)
    if n < 16:
        head = bytes([0x90 | n])
    elif n < 0x10000:
        head = b"\xdc" + struct.pack(">H", n)
    else:
        head = b"\xdd" + struct.pack(">I", n)
    return head + b"".join(items)


def request_packed(request_id: int, name: str, packed_body: bytes) -> bytes:
    """``pack(request(request_id, {name: body}))`` for a body already packed."""
    head = pack({"request_id": request_id, "request": {name: None}})
    # The map's last value is nil (0xc0): put the packed body in its place.
    return b"\x81\xa7Request" + head[:-1] + packed_body
