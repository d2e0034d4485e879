"""One framed connection to a coordinator, and finding the leader.

``dial`` tries the addresses of a high-availability group in turn, goes to
the leader a standby names in ``NotLeader`` (at most ``MAX_REDIRECTS`` times
per round), and, given several addresses or told that nobody leads yet,
tries another round after a backoff until ``failover_timeout``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Union

from taskyard import wire
from taskyard.errors import ProtocolMismatch, Refused, TaskyardError, Unauthorized, Unreachable

MAX_REDIRECTS = 3
CONNECT_TIMEOUT = 5.0
FIRST_ROUND_BACKOFF = 0.05
MAX_ROUND_BACKOFF = 1.0
READ_CHUNK = 256 * 1024

Addresses = Union[str, "list[str]", "tuple[str, ...]"]


def parse_addresses(addresses: Addresses) -> list[str]:
    """``host:port``, a comma-separated list of them, or a list: checked like
    the Rust peers check them (a non-empty host, a port from 1 to 65535)."""
    items = addresses.split(",") if isinstance(addresses, str) else list(addresses)
    if not items or all(not a.strip() for a in items):
        raise ValueError(f"coordinator address {addresses!r}: is empty: give host:port")
    out = []
    for position, raw in enumerate(items, 1):
        addr = raw.strip()
        if not addr:
            raise ValueError(
                f"coordinator address {addresses!r}: element {position} is empty (a stray comma?)"
            )
        host, sep, port = addr.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host:
            raise ValueError(f"coordinator address {addr!r} is not host:port")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(
                f"coordinator address {addr!r}: the port must be a number from 1 to 65535"
            )
        out.append(addr)
    return out


def split_host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


@dataclass
class Security:
    """How to reach a coordinator: the listener's token, and TLS when
    ``tls_ca`` (a PEM file of the CA that signed the coordinator) is set."""

    token: str | None = None
    tls_ca: str | None = None
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        self._context: ssl.SSLContext | None = None
        if self.tls_ca is not None:
            try:
                self._context = ssl.create_default_context(cafile=self.tls_ca)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"tls_ca {self.tls_ca}: {e}") from e

    def wrap(self, sock: socket.socket, addr: str) -> socket.socket:
        if self._context is None:
            return sock
        name = self.tls_server_name or split_host_port(addr)[0]
        return self._context.wrap_socket(sock, server_hostname=name)


class NotLeader(TaskyardError):
    """The coordinator dialled is a standby; ``leader`` is where to go
    (``None``: nobody leads right now)."""

    def __init__(self, addr: str, leader: str | None) -> None:
        super().__init__(
            f"coordinator at {addr} is a standby"
            + (f" (the leader is at {leader})" if leader else " (no coordinator leads right now)")
        )
        self.addr = addr
        self.leader = leader


class FramedSocket:
    """Whole frames in, whole frames out. Reads happen on one thread at a
    time; ``send`` may be called from any thread (a lock keeps frames whole,
    and on TLS also keeps reads and writes apart)."""

    def __init__(self, sock: socket.socket, addr: str, role: str, max_frame_bytes: int) -> None:
        self.sock = sock
        self.addr = addr
        self.role = role
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0
        self._write_lock = threading.Lock()
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._first = True
        self.closed = False

    def send(self, data: bytes) -> None:
        """Writes ``data`` (whole frames) or raises ``Unreachable``."""
        with self._write_lock:
            if self.closed:
                raise Unreachable(f"connection to {self.addr} is closed", self.addr)
            try:
                self.sock.sendall(data)
            except (OSError, ValueError) as e:
                self._close_locked()
                raise Unreachable(f"connection to {self.addr} lost: {e}", self.addr) from e

    def close(self) -> None:
        with self._write_lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()

    def next_frame(self) -> Any | None:
        """The next whole frame already received, decoded; ``None`` if none is."""
        avail = len(self._buf) - self._pos
        if avail < 4:
            return None
        (size,) = wire.HEADER.unpack_from(self._buf, self._pos)
        if size > self.max_frame_bytes:
            hint = wire.foreign_server(bytes(self._buf[self._pos : self._pos + 8]), self.role)
            if self._first and hint:
                raise ProtocolMismatch(f"{self.addr}: {hint}", self.addr)
            raise ProtocolMismatch(
                f"{self.addr}: frame of {size} bytes exceeds the largest accepted "
                f"({self.max_frame_bytes})",
                self.addr,
            )
        if avail < 4 + size:
            return None
        start = self._pos + 4
        body = bytes(self._buf[start : start + size])
        self._pos = start + size
        if self._pos > READ_CHUNK:
            del self._buf[: self._pos]
            self._pos = 0
        self._first = False
        try:
            return wire.unpack(body)
        except wire.FrameError as e:
            raise ProtocolMismatch(f"{self.addr}: {e}", self.addr) from e

    def readable(self, timeout: float) -> bool:
        """Waits up to ``timeout`` for bytes (or a close) to read."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        try:
            ready, _, _ = select.select([self.sock], [], [], timeout)
        except (OSError, ValueError):
            return True  # closed under us: the read reports it
        return bool(ready)

    def fill(self) -> None:
        """Reads what the socket has (blocking up to its timeout). A close is
        ``Unreachable``."""
        try:
            if self._tls:
                # One TLS connection must not be read and written at once
                # (OpenSSL's rule): reads share the writers' lock. The
                # reader only gets here once bytes are waiting, so the lock
                # is held for the rest of one record at most.
                with self._write_lock:
                    data = self.sock.recv(READ_CHUNK)
            else:
                data = self.sock.recv(READ_CHUNK)
        except socket.timeout as e:
            raise NoAnswer(f"{self.addr} did not answer in time", self.addr) from e
        except ssl.SSLWantReadError:
            return
        except (OSError, ValueError) as e:
            self.close()
            raise Unreachable(f"connection to {self.addr} lost: {e}", self.addr) from e
        if not data:
            self.close()
            truncated = len(self._buf) > self._pos
            raise Unreachable(
                f"{self.addr} closed the connection"
                + (" in the middle of a frame" if truncated else ""),
                self.addr,
            )
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def receive(self) -> Any:
        """Blocks (up to the socket's timeout per read) for the next frame."""
        while True:
            message = self.next_frame()
            if message is not None:
                return message
            self.fill()


class NoAnswer(Unreachable):
    """No answer came within the read timeout; the connection is dropped."""


def _open(addr: str, security: Security, timeout: float) -> socket.socket:
    host, port = split_host_port(addr)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise Unreachable(f"cannot reach coordinator at {addr}: {e}", addr) from e
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return security.wrap(sock, addr)
    except ssl.SSLError as e:
        sock.close()
        raise ProtocolMismatch(f"TLS with {addr}: {e}", addr) from e
    except OSError as e:
        sock.close()
        raise Unreachable(f"TLS with {addr}: {e}", addr) from e


@contextmanager
def closed_on_error(conn: FramedSocket) -> Iterator[None]:
    """Closes ``conn`` when the block raises; a frame that is not a message
    of the protocol is raised as ``ProtocolMismatch``."""
    try:
        yield
    except wire.FrameError as e:
        conn.close()
        raise ProtocolMismatch(f"{conn.addr}: {e}", conn.addr) from e
    except BaseException:
        conn.close()
        raise


def handshake(
    addr: str,
    role: str,
    security: Security,
    max_frame_bytes: int,
    timeout: float = CONNECT_TIMEOUT,
) -> FramedSocket:
    """Connects to ``addr`` and exchanges ``Hello``; the returned socket has
    ``timeout`` as its read timeout."""
    sock = _open(addr, security, timeout)
    conn = FramedSocket(sock, addr, role, max_frame_bytes)
    with closed_on_error(conn):
        conn.send(wire.frame(wire.hello(role, security.token)))
        name, body = wire.variant(conn.receive())
    if name == "Hello":
        theirs = body.get("protocol_version") if isinstance(body, dict) else None
        if theirs == wire.PROTOCOL_VERSION:
            return conn
        conn.close()
        raise ProtocolMismatch(
            f"coordinator at {addr} speaks protocol version {theirs}, "
            f"this client speaks {wire.PROTOCOL_VERSION}",
            addr,
        )
    conn.close()
    if name == "Error":
        message = str(body.get("message", "")) if isinstance(body, dict) else ""
        if message == wire.UNAUTHORIZED:
            raise Unauthorized(f"coordinator at {addr}: unauthorized: check the {role} token")
        if message.startswith((wire.VERSION_MISMATCH, wire.WRONG_LISTENER)):
            raise ProtocolMismatch(f"coordinator at {addr} refused: {message}", addr)
        raise Refused(f"coordinator at {addr} refused: {message}", addr)
    if name == "NotLeader":
        leader = body.get("leader") if isinstance(body, dict) else None
        to = leader.get(role) if isinstance(leader, dict) else None
        raise NotLeader(addr, to if isinstance(to, str) else None)
    raise ProtocolMismatch(f"{addr}: unexpected {name} before Hello", addr)


def dial(
    addrs: list[str],
    start: int,
    failover_timeout: float,
    attempt: Callable[[str], Any],
) -> tuple[Any, int]:
    """Rounds through ``addrs`` from index ``start`` calling ``attempt(addr)``
    (which dials and handshakes) until one returns; follows ``NotLeader``.
    Returns what ``attempt`` returned and the index to start from next time.
    Errors no other address would change (``Unauthorized``, TLS, protocol
    version) are raised at once."""
    deadline = time.monotonic() + failover_timeout
    backoff = FIRST_ROUND_BACKOFF
    while True:
        last: BaseException | None = None
        hope = len(addrs) > 1
        queue = [addrs[(start + i) % len(addrs)] for i in range(len(addrs))]
        redirects = 0
        while queue:
            addr = queue.pop(0)
            try:
                result = attempt(addr)
            except NotLeader as e:
                last = e
                if e.leader is None:
                    hope = True
                elif redirects < MAX_REDIRECTS:
                    redirects += 1
                    queue.insert(0, e.leader)
                continue
            except ProtocolMismatch:
                raise
            except Unreachable as e:
                last = e
                continue
            position = addrs.index(addr) if addr in addrs else start
            return result, position
        if not hope or time.monotonic() + backoff > deadline:
            if isinstance(last, NotLeader):
                raise Unreachable(str(last), last.addr) from last
            assert last is not None
            raise last
        time.sleep(backoff)
        backoff = min(backoff * 2, MAX_ROUND_BACKOFF)
