"""The worker API: Python worker processes against a real coordinator, next to
Rust workers and the Rust CLI."""

from __future__ import annotations

import collections
import json
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Coordinator, Processes, wait_until, workers_registered

from taskyard import Client, JobFailed


def events(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split()) for line in path.read_text().splitlines() if line]  # type: ignore[misc]


def started(path: Path, kind: str = "started") -> set[str]:
    return {job for k, job in events(path) if k == kind}


def test_a_python_worker_runs_1000_jobs_from_python_and_the_rust_cli(
    procs: Processes, coordinator: Coordinator
) -> None:
    procs.python_worker(coordinator, "--capacity", "8")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        from_python = client.submit_many([("echo", {"message": f"py {i}"}) for i in range(800)])

        def cli_submit(i: int) -> str:
            payload = json.dumps({"message": f"cli {i}"})
            out = procs.cli(coordinator, "submit", "echo", "--payload", payload)
            assert out.returncode == 0, out.stderr
            return out.stdout.strip()

        with ThreadPoolExecutor(4) as pool:
            from_cli = list(pool.map(cli_submit, range(200)))
        assert all(re.fullmatch(r"[0-9a-f-]{36}", j) for j in from_cli), from_cli[:3]
        for i, job_id in enumerate(from_python):
            assert client.wait(job_id, timeout=60).result == f"py {i}".encode()
        for i, job_id in enumerate(from_cli):
            assert client.wait(job_id, timeout=60).result == f"cli {i}".encode()
        # The CLI reads what the Python worker produced.
        out = procs.cli(coordinator, "result", from_cli[7])
        assert out.returncode == 0 and out.stdout == "cli 7"
        assert len(client.list(state="SUCCEEDED", limit=1000)) == 1000


def test_progress_reaches_taskyard_status_and_cancel_reaches_the_handler(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    log = tmp_path / "events"
    procs.python_worker(coordinator, "--events", str(log))
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        job_id = client.submit("py.slow", {"millis": 60_000})
        wait_until("the handler started", lambda: job_id in started(log))

        def progress_shown() -> bool:
            out = procs.cli(coordinator, "status", job_id)
            shown = re.search(r"progress\s+\d+% sleeping", out.stdout)
            return out.returncode == 0 and shown is not None

        wait_until("taskyard status shows the progress", progress_shown)
        shown = json.loads(procs.cli(coordinator, "--json", "status", job_id).stdout)
        assert shown["progress"]["message"] == "sleeping"
        assert client.cancel(job_id) is True
        wait_until("the handler saw the cancel", lambda: job_id in started(log, "cancelled"))
        assert client.status(job_id).state == "CANCELLED"
        assert job_id not in started(log, "finished")


def test_a_cpu_bound_handler_does_not_starve_the_heartbeat(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    # Heartbeat every 0.3 s; the coordinator declares a worker dead after
    # 1.5 s of silence. Eight handlers spin the CPU for 2.5 s (more than
    # eight heartbeat intervals and longer than the timeout).
    log = tmp_path / "events"
    procs.python_worker(coordinator, "--events", str(log), "--heartbeat-interval", "0.3")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        [before] = client.workers()
        ids = client.submit_many([("py.cpu", {"seconds": 2.5}) for _ in range(8)])
        for job_id in ids:
            job = client.wait(job_id, timeout=30)
            assert job.attempts == 1, job.history
            assert [a.outcome for a in job.history] == [{"kind": "succeeded"}]
        [after] = client.workers()
        assert after.registered_at == before.registered_at, "the worker was dropped and came back"
        assert len(started(log)) == 8


def test_retryable_and_permanent_failures_and_the_attempt_number(
    procs: Processes, coordinator: Coordinator
) -> None:
    procs.python_worker(coordinator)
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        permanent = client.submit(
            "py.fail", {"kind": "permanent", "message": "bad input"}, max_attempts=5
        )
        retryable = client.submit(
            "py.fail", {"kind": "retryable", "message": "flaky"}, max_attempts=3
        )
        second = client.submit("py.attempt", {"succeed_on": 2}, max_attempts=3)
        with pytest.raises(JobFailed) as failed:
            client.wait(permanent, timeout=20)
        assert failed.value.job.attempts == 1 and failed.value.job.error == "bad input"
        with pytest.raises(JobFailed) as failed:
            client.wait(retryable, timeout=20)
        assert failed.value.job.attempts == 3 and failed.value.job.error == "flaky"
        job = client.wait(second, timeout=20)
        assert job.attempts == 2 and job.result_json() == 2


def test_sigterm_drains(procs: Processes, coordinator: Coordinator, tmp_path: Path) -> None:
    log = tmp_path / "events"
    worker = procs.python_worker(coordinator, "--events", str(log), "--capacity", "4")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        running = client.submit_many([("py.slow", {"millis": 1500}) for _ in range(4)])
        wait_until("all four started", lambda: len(started(log)) == 4)
        worker.send_signal(signal.SIGTERM)
        wait_until("the worker says it drains", lambda: client.workers()[0].draining)
        later = client.submit("py.slow", {"millis": 10})
        assert worker.wait(timeout=20) == 0
        for job_id in running:
            job = client.wait(job_id, timeout=10)
            assert job.attempts == 1 and job.result == b"slept"
        assert started(log, "finished") == set(running)
        assert client.status(later).state == "QUEUED", "a draining worker took a new job"


def test_kill_9_of_a_python_worker_retries_its_jobs_on_another(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    first_log, second_log = tmp_path / "first", tmp_path / "second"
    first = procs.python_worker(coordinator, "--events", str(first_log), "--worker-id", "first")
    with coordinator.client_for() as client:
        wait_until("the first worker registered", workers_registered(client, 1))
        ids = client.submit_many([("py.slow", {"millis": 2000}) for _ in range(4)])
        wait_until("the first worker runs all four", lambda: len(started(first_log)) == 4)
        procs.python_worker(coordinator, "--events", str(second_log), "--worker-id", "second")
        wait_until("the second worker registered", workers_registered(client, 2))
        first.kill()
        for job_id in ids:
            job = client.wait(job_id, timeout=30)
            assert job.worker_id == "second" and job.attempts == 2, job
            assert job.history[0].outcome is not None
            assert job.history[0].outcome["kind"] == "worker_lost"
        assert started(second_log, "finished") == set(ids)


def test_rust_and_python_workers_share_the_load(procs: Processes, coordinator: Coordinator) -> None:
    procs.python_worker(coordinator, "--worker-id", "python", "--capacity", "4", "--types", "echo")
    procs.rust_worker(coordinator, "--worker-id", "rust", "--capacity", "4")
    with coordinator.client_for() as client:
        wait_until("both workers registered", workers_registered(client, 2))
        ids = client.submit_many([("echo", {"message": str(i)}) for i in range(1000)])
        for i, job_id in enumerate(ids):
            assert client.wait(job_id, timeout=60).result == str(i).encode()
        done = client.list(state="SUCCEEDED", limit=1000)
        by = collections.Counter(j.worker_id for j in done)
        assert set(by) == {"python", "rust"}, by
        assert min(by.values()) >= 50, by


def test_a_restarted_coordinator_gets_back_the_attempts_the_worker_holds(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    log = tmp_path / "events"
    procs.python_worker(coordinator, "--events", str(log))
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        ids = client.submit_many([("py.slow", {"millis": 3000}) for _ in range(3)])
        wait_until("all three started", lambda: len(started(log)) == 3)
    coordinator.restart()
    with coordinator.client_for() as client:
        for job_id in ids:
            job = client.wait(job_id, timeout=30)
            assert job.attempts == 1 and job.result == b"slept", job
        assert started(log) == set(ids), "an attempt ran twice"


def test_a_client_reconnects_after_a_coordinator_restart(coordinator: Coordinator) -> None:
    client: Client = coordinator.client_for()
    keyed = client.submit("echo", {"message": "x"}, idempotency_key="survives")
    coordinator.restart()
    assert client.submit("echo", {"message": "x"}, idempotency_key="survives") == keyed
    assert client.status(keyed).state == "QUEUED"
    client.close()


def test_a_worker_with_a_wrong_token_stops_with_unauthorized(procs: Processes) -> None:
    c = procs.coordinator("--worker-token", "worker-secret")
    wrong = procs.python_worker(c, "--token", "not-it")
    assert wrong.wait(timeout=20) != 0
    log = (procs.tmp / "python-worker-0.log").read_text()
    assert "Unauthorized" in log, log
    right = procs.python_worker(c, "--token", "worker-secret", "--worker-id", "right")
    with c.client_for() as client:
        wait_until("the right token registers", workers_registered(client, 1))
        assert [w.worker_id for w in client.workers()] == ["right"]
    assert right.poll() is None


def test_a_worker_whose_registration_is_refused_stops_with_rejected(procs: Processes) -> None:
    c = procs.coordinator("--max-worker-capacity", "2")
    refused = procs.python_worker(c, "--capacity", "4")
    assert refused.wait(timeout=20) != 0
    log = (procs.tmp / "python-worker-0.log").read_text()
    assert "Rejected" in log and "registration refused: capacity" in log, log


def test_a_worker_prints_one_line_saying_what_it_serves(
    procs: Processes, coordinator: Coordinator
) -> None:
    procs.python_worker(coordinator, "--types", "echo,noop", "--capacity", "3")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
    log = (procs.tmp / "python-worker-0.log").read_text()
    lines = [line for line in log.splitlines() if line.startswith("taskyard worker ")]
    assert len(lines) == 1, log
    assert f"serving echo, noop for coordinator {coordinator.worker} (capacity 3)" in lines[0]


def test_the_drain_timeout_cancels_what_still_runs(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    log = tmp_path / "events"
    worker = procs.python_worker(coordinator, "--events", str(log), "--drain-timeout", "0.5")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        job_id = client.submit("py.slow", {"millis": 60_000})
        wait_until("the handler started", lambda: job_id in started(log))
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
        assert job_id in started(log, "cancelled")
        # No result was sent: the coordinator takes the attempt back.
        wait_until("the job is back in line", lambda: client.status(job_id).state != "RUNNING")
        job = client.status(job_id)
        assert job.state in ("QUEUED", "RETRY_WAIT") and job.result is None, job


def test_a_prefetching_worker_holds_more_than_it_runs(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    log = tmp_path / "events"
    procs.python_worker(coordinator, "--events", str(log), "--capacity", "2", "--prefetch", "2")
    with coordinator.client_for() as client:
        wait_until("the worker registered", workers_registered(client, 1))
        assert client.workers()[0].capacity == 4, "capacity 2 plus prefetch 2"
        ids = client.submit_many([("py.slow", {"millis": 1000}) for _ in range(6)])
        wait_until("four assigned", lambda: client.counts().get("RUNNING", 0) == 4)
        wait_until("two handlers started", lambda: len(started(log)) == 2)
        time.sleep(0.3)  # the first two take a second: nothing else may start meanwhile
        assert len(started(log)) == 2, "only capacity handlers run at once"
        for job_id in ids:
            assert client.wait(job_id, timeout=30).attempts == 1
