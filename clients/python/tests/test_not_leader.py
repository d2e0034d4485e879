"""Following ``NotLeader``: a standby (here a stand-in that speaks the
standby's side of the Hello exchange, the golden ``NotLeader`` frame shape)
sends clients and workers to the leader it names."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Coordinator, Processes, wait_until, workers_registered

from taskyard import Client, Unreachable, wire


class Standby:
    """Accepts connections, reads the peer's Hello and answers ``NotLeader``
    naming ``leader`` (``None``: nobody leads), then closes."""

    def __init__(self, leader: dict[str, Any] | None) -> None:
        self.leader = leader
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.hellos: list[Any] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                header = conn.recv(4, socket.MSG_WAITALL)
                (size,) = wire.HEADER.unpack(header)
                self.hellos.append(wire.unpack(conn.recv(size, socket.MSG_WAITALL)))
                conn.sendall(wire.frame({"NotLeader": {"leader": self.leader}}))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def standbys() -> Iterator[list[Standby]]:
    made: list[Standby] = []
    yield made
    for s in made:
        s.close()


def leader_of(c: Coordinator) -> dict[str, Any]:
    return {"node": "coord-a", "epoch": 1, "client": c.client, "worker": c.worker, "http": None}


def test_a_client_follows_not_leader_to_the_leader(
    coordinator: Coordinator, standbys: list[Standby]
) -> None:
    standby = Standby(leader_of(coordinator))
    standbys.append(standby)
    with Client(standby.addr) as client:
        assert client.addr == coordinator.client
        client.ping()
    assert standby.hellos[0]["Hello"]["role"] == "client"


def test_nobody_leads_sends_the_client_to_the_next_address(
    coordinator: Coordinator, standbys: list[Standby]
) -> None:
    standby = Standby(None)
    standbys.append(standby)
    with Client(f"{standby.addr},{coordinator.client}") as client:
        assert client.addr == coordinator.client
    with pytest.raises(Unreachable) as nobody:
        Client(standby.addr, failover_timeout=0.3)
    assert "no coordinator leads" in str(nobody.value)


def test_a_worker_follows_not_leader_to_the_leader(
    procs: Processes, coordinator: Coordinator, standbys: list[Standby]
) -> None:
    standby = Standby(leader_of(coordinator))
    standbys.append(standby)
    # The last --coordinator wins: the worker is given only the standby.
    procs.python_worker(coordinator, "--coordinator", standby.addr, "--worker-id", "followed")
    with coordinator.client_for() as client:
        wait_until("the worker registered with the leader", workers_registered(client, 1))
        assert [w.worker_id for w in client.workers()] == ["followed"]
        job_id = client.submit("echo", {"message": "led"})
        assert client.wait(job_id, timeout=20).result == b"led"
    assert standby.hellos[0]["Hello"]["role"] == "worker"
