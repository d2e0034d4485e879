"""Fixtures: a real taskyard-coordinator process on free loopback ports with
its own SQLite database, Python worker processes (tests/worker_main.py), Rust
worker processes and the Rust CLI.

The binaries come from ``$TASKYARD_BIN_DIR`` (default: the repository's
``target/debug``; build them with ``cargo build --bins``). Missing ones skip
the tests that need them, except under ``TASKYARD_REQUIRE_EXTERNAL=1`` (set
by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from taskyard import Client, Unreachable

REPO = Path(__file__).resolve().parents[3]
BIN_DIR = Path(os.environ.get("TASKYARD_BIN_DIR", REPO / "target" / "debug"))
WORKER_MAIN = Path(__file__).resolve().parent / "worker_main.py"


def binary(name: str) -> Path:
    path = BIN_DIR / name
    if not os.access(path, os.X_OK):
        note = f"{path} not found: build it with `cargo build --bins` (or set TASKYARD_BIN_DIR)"
        if os.environ.get("TASKYARD_REQUIRE_EXTERNAL") == "1":
            pytest.fail(note)
        pytest.skip(note)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Polls ``check`` every 10 ms until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.01)


class Coordinator:
    """A taskyard-coordinator process; ``client``/``worker`` are its addresses."""

    def __init__(
        self, tmp: Path, args: list[str], token: str | None = None, tls_ca: str | None = None
    ) -> None:
        self.tmp = tmp
        self.client = f"127.0.0.1:{free_port()}"
        self.worker = f"127.0.0.1:{free_port()}"
        self.http = f"127.0.0.1:{free_port()}"
        self.token = token
        self.tls_ca = tls_ca
        self.log_path = tmp / "coordinator.log"
        command = [
            str(binary("taskyard-coordinator")),
            "--db-path",
            str(tmp / "taskyard.db"),
            "--sqlite-preallocate-wal",
            "false",
            "--client-listen",
            self.client,
            "--worker-listen",
            self.worker,
            "--http-listen",
            self.http,
            "--log-level",
            "warn",
            *args,
        ]
        self.command = command
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until("the coordinator answers", self._answers, timeout=20)

    def restart(self) -> None:
        """SIGTERM, then the same command again (same ports, same database)."""
        self.stop()
        self.log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until("the restarted coordinator answers", self._answers, timeout=20)

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"coordinator exited: {self.log_path.read_text()[-2000:]}")
        try:
            Client(self.client, token=self.token, tls_ca=self.tls_ca, timeout=2).close()
            return True
        except Unreachable:
            return False

    def client_for(self, **kwargs: Any) -> Client:
        kwargs.setdefault("token", self.token)
        kwargs.setdefault("tls_ca", self.tls_ca)
        return Client(self.client, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class Processes:
    """Every process a test starts, stopped at its end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[subprocess.Popen[bytes]] = []
        self.coordinators: list[Coordinator] = []

    def coordinator(
        self, *args: str, token: str | None = None, tls_ca: str | None = None
    ) -> Coordinator:
        d = self.tmp / f"coordinator-{len(self.coordinators)}"
        d.mkdir()
        c = Coordinator(d, list(args), token=token, tls_ca=tls_ca)
        self.coordinators.append(c)
        return c

    def python_worker(
        self, coordinator: Coordinator, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """tests/worker_main.py against ``coordinator`` (see its arguments)."""
        n = len(self.started)
        log = open(self.tmp / f"python-worker-{n}.log", "wb")  # noqa: SIM115
        full_env = {**os.environ, **(env or {})}
        p = subprocess.Popen(
            [sys.executable, str(WORKER_MAIN), "--coordinator", coordinator.worker, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
        self.started.append(p)
        return p

    def rust_worker(self, coordinator: Coordinator, *args: str) -> subprocess.Popen[bytes]:
        n = len(self.started)
        log = open(self.tmp / f"rust-worker-{n}.log", "wb")  # noqa: SIM115
        p = subprocess.Popen(
            [
                str(binary("taskyard-worker")),
                "--coordinator",
                coordinator.worker,
                "--log-level",
                "warn",
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.started.append(p)
        return p

    def cli(self, coordinator: Coordinator, *args: str) -> subprocess.CompletedProcess[str]:
        """The Rust CLI against ``coordinator``; its output and exit code."""
        return subprocess.run(
            [str(binary("taskyard")), "--coordinator", coordinator.client, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def stop_all(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
            p.wait()
        for c in self.coordinators:
            c.stop()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()


@pytest.fixture
def coordinator(procs: Processes) -> Coordinator:
    """A coordinator with short timeouts, so lost workers are noticed quickly."""
    return procs.coordinator(
        "--heartbeat-timeout-millis",
        "1500",
        "--sweep-interval-millis",
        "50",
        "--retry-base-millis",
        "50",
    )


def workers_registered(client: Client, count: int) -> Callable[[], bool]:
    return lambda: len(client.workers()) >= count
