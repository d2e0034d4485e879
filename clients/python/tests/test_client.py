"""The producer API against a real coordinator process."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest
from conftest import Coordinator, Processes, wait_until, workers_registered

from taskyard import (
    BatchRejected,
    Client,
    JobFailed,
    NotFound,
    ProtocolMismatch,
    Rejected,
    Submission,
    Timeout,
    Unauthorized,
    Unreachable,
)


def test_submit_wait_status_result_and_list(procs: Processes, coordinator: Coordinator) -> None:
    procs.python_worker(coordinator)
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        job_id = client.submit("echo", {"message": "hello from python"}, priority="high")
        job = client.wait(job_id, timeout=20)
        assert job.state == "SUCCEEDED" and job.job_id == job_id
        assert job.result == b"hello from python"
        assert job.payload_value() == {"message": "hello from python"}
        assert client.result(job_id) == b"hello from python"
        status = client.status(job_id)
        assert status.state == "SUCCEEDED" and status.priority == "high"
        assert status.worker_id is not None and status.worker_id.endswith(str(procs.started[0].pid))
        listed = client.list(state="SUCCEEDED", task_type="echo")
        assert [j.job_id for j in listed] == [job_id]
        assert client.list(state="FAILED") == []
        [worker] = client.workers()
        assert worker.capacity == 8 and "echo" in worker.task_types


def test_a_rejection_names_the_field(coordinator: Coordinator) -> None:
    with coordinator.client_for() as client:
        with pytest.raises(Rejected) as bad_payload:
            client.submit("sleep", {"millis": "soon"})
        assert bad_payload.value.field == "payload.millis", bad_payload.value
        with pytest.raises(Rejected) as bad_type:
            client.submit("no spaces allowed", {})
        assert bad_type.value.field == "task_type", bad_type.value
        with pytest.raises(Rejected) as bad_priority:
            client.submit("echo", {"message": "x"}, priority="urgent")
        assert bad_priority.value.field == "priority"
        # Nothing was stored.
        assert client.list() == []


def test_submit_many_returns_ids_in_order_and_names_the_rejected(coordinator: Coordinator) -> None:
    with coordinator.client_for() as client:
        ids = client.submit_many([("echo", {"message": str(i)}) for i in range(5000)])
        assert len(set(ids)) == 5000
        assert client.counts()["QUEUED"] == 5000
        assert client.counts(task_type="sleep").get("QUEUED", 0) == 0
        assert client.payload(ids[1234]) == client.payload(ids[1234])
        assert client.status(ids[4999]).payload_value() == {"message": "4999"}
        with pytest.raises(BatchRejected) as rejected:
            client.submit_many(
                [("echo", {"message": "ok"}), ("sleep", {"millis": -1}), ("echo", {"message": "b"})]
            )
        assert rejected.value.job_ids[0] is not None and rejected.value.job_ids[1] is None
        assert list(rejected.value.reasons) == [1]
        assert rejected.value.reasons[1].startswith("payload.millis")
        assert client.status(rejected.value.job_ids[2] or "").state == "QUEUED"


def test_idempotency_delay_cancel_retry_and_not_found(coordinator: Coordinator) -> None:
    with coordinator.client_for() as client:
        first = client.submit("echo", {"message": "x"}, idempotency_key="k-1")
        assert client.submit("echo", {"message": "x"}, idempotency_key="k-1") == first
        keyed_view = client.status(first)
        assert keyed_view.idempotency_key == "k-1"
        assert (keyed_view.schedule, keyed_view.schedule_slot) == (None, None)
        keyed = [Submission("echo", {"message": "y"}, idempotency_key="k-2")]
        assert client.submit_many(keyed) == client.submit_many(keyed)

        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        held = client.status(client.submit("echo", {"message": "x"}, at=later))
        assert held.not_before is not None
        assert abs(held.not_before - later.timestamp() * 1000) < 5_000
        delayed = client.status(client.submit("echo", {"message": "x"}, delay=600))
        assert delayed.not_before is not None

        assert client.cancel(first) is True
        assert client.status(first).state == "CANCELLED"
        assert client.cancel(first) is False
        with pytest.raises(JobFailed) as failed:
            client.wait(first, timeout=5)
        assert failed.value.job.state == "CANCELLED"
        client.retry(first)
        assert client.status(first).state == "QUEUED"
        with pytest.raises(Rejected):
            client.retry(first)
        with pytest.raises(Timeout) as timed_out:
            client.wait(first, timeout=0.2)
        assert timed_out.value.job.state == "QUEUED"

        unknown = str(uuid.uuid4())
        with pytest.raises(NotFound):
            client.status(unknown)
        with pytest.raises(NotFound):
            client.cancel(unknown)
        with pytest.raises(ValueError):
            client.status("not-a-uuid")


def test_job_options_reach_the_job(coordinator: Coordinator) -> None:
    with coordinator.client_for() as client:
        job = client.status(
            client.submit("echo", {"message": "x"}, max_attempts=7, timeout_ms=1234, priority="low")
        )
        assert (job.max_attempts, job.timeout_ms, job.priority) == (7, 1234, "low")


def test_a_wrong_token_is_unauthorized(procs: Processes) -> None:
    c = procs.coordinator("--client-token", "right-token", token="right-token")
    with pytest.raises(Unauthorized):
        Client(c.client, token="wrong-token")
    with pytest.raises(Unauthorized):
        Client(c.client)
    with c.client_for() as client:
        client.ping()


def test_unreachable_and_bad_addresses() -> None:
    from conftest import free_port

    with pytest.raises(Unreachable):
        Client(f"127.0.0.1:{free_port()}", failover_timeout=0.5)
    for bad in ["", "127.0.0.1", "127.0.0.1:0", "a:1,,b:2", "host:http"]:
        with pytest.raises(ValueError):
            Client(bad)


def make_ca(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate it signs for 127.0.0.1 and localhost."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("taskyard test CA"))
        .issuer_name(name("taskyard test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("coordinator"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_path, cert_path, key_path


def test_the_other_roles_port_is_a_protocol_mismatch(coordinator: Coordinator) -> None:
    with pytest.raises(ProtocolMismatch, match="wrong listener"):
        Client(coordinator.worker)


def test_tls_with_a_ca_made_here(procs: Processes, tmp_path: Path) -> None:
    ca, cert, key = make_ca(tmp_path)
    c = procs.coordinator("--tls-cert", str(cert), "--tls-key", str(key), tls_ca=str(ca))
    procs.python_worker(c, "--tls-ca", str(ca))
    with c.client_for() as client:
        wait_until("the TLS worker registered", workers_registered(client, 1))
        ids = client.submit_many([("echo", {"message": f"tls {i}"}) for i in range(200)])
        for i in (0, 199):
            assert client.wait(ids[i], timeout=20).result == f"tls {i}".encode()
        with pytest.raises(ProtocolMismatch) as plain:
            Client(c.client)
        assert "TLS" in str(plain.value)
    # A CA that did not sign the coordinator's certificate is refused.
    (tmp_path / "other").mkdir()
    other_ca, _, _ = make_ca(tmp_path / "other")
    with pytest.raises(ProtocolMismatch):
        Client(c.client, tls_ca=str(other_ca))


def test_a_concurrency_key_holds_jobs_of_a_full_key_and_says_why(procs: Processes) -> None:
    coordinator = procs.coordinator("--limit", '{pattern = "acct:*", max-running = 1}')
    procs.rust_worker(coordinator, "--capacity", "4")
    with coordinator.client_for() as client:
        first = client.submit("sleep", {"millis": 60_000}, concurrency_key="acct:1")
        second = client.submit("sleep", {"millis": 1}, concurrency_key="acct:1")
        other = client.submit("sleep", {"millis": 1}, concurrency_key="acct:2")
        client.wait(other, timeout=30)
        wait_until("the first job runs", lambda: client.status(first).state == "RUNNING", 30)
        held = client.status(second)
        assert held.state == "QUEUED"
        assert held.concurrency_key == "acct:1"
        assert held.waiting == "waiting for concurrency key acct:1: 1/1 running"
        assert client.cancel(first) is True
        assert client.wait(second, timeout=30).state == "SUCCEEDED"
        with pytest.raises(Rejected) as refused:
            client.submit("echo", {"message": "x"}, concurrency_key="k" * 257)
        assert "concurrency_key" in str(refused.value)
