"""Every golden frame (tests/golden/frames/, written by the Rust test
golden_frames from the real protocol types) decodes and re-encodes byte for
byte, and every frame this package builds matches its golden copy."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from taskyard import wire
from taskyard.client import Submission, _submission
from taskyard.views import JobSummary, JobView, WorkerView

FRAMES = Path(__file__).resolve().parents[3] / "tests" / "golden" / "frames"
NAMES = sorted(p.stem for p in FRAMES.glob("*.msgpack"))

JOB = uuid.UUID("01938f2a-5c10-7d21-8a4e-001122334401").bytes
LEASE = uuid.UUID("6f1c9b03-2e44-4b7a-9c55-aabbccddee02").bytes


def golden(name: str) -> bytes:
    return (FRAMES / f"{name}.msgpack").read_bytes()


def test_the_fixtures_are_there() -> None:
    assert len(NAMES) >= 50, f"expected the golden frames in {FRAMES}"
    for name in NAMES:
        assert (FRAMES / f"{name}.json").is_file(), name


@pytest.mark.parametrize("name", NAMES)
def test_every_golden_frame_decodes_and_reencodes_byte_for_byte(name: str) -> None:
    body = golden(name)
    assert wire.pack(wire.unpack(body)) == body


def as_json(value: Any) -> Any:
    """The JSON reading of a decoded frame: 16-byte bins under id keys as
    UUID text, other bins as number arrays (how the .json files show them)."""
    if isinstance(value, dict):
        return {k: as_json_field(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    return value


ID_KEYS = {"job_id", "lease", "job_ids", "done", "candidates"}


def as_json_field(key: str, value: Any) -> Any:
    if key in ID_KEYS:
        if isinstance(value, bytes):
            return str(uuid.UUID(bytes=value))
        if isinstance(value, list):
            return [str(uuid.UUID(bytes=v)) for v in value]
    return as_json(value)


@pytest.mark.parametrize("name", NAMES)
def test_every_golden_frame_means_what_its_json_says(name: str) -> None:
    meaning = json.loads((FRAMES / f"{name}.json").read_text())
    assert as_json(wire.unpack(golden(name))) == meaning


def test_frames_this_package_sends_match_their_golden_copies() -> None:
    sent = {
        "worker_hello": wire.hello("worker", "worker-secret"),
        "client_hello": wire.hello("client", "client-secret"),
        "worker_register": wire.register("py-worker-1", 8, ["resize", "echo"], [(JOB, LEASE)]),
        "worker_heartbeat": wire.HEARTBEAT,
        "worker_draining": wire.DRAINING,
        "worker_task_result": wire.task_succeeded(JOB, LEASE, b'{"width":640}'),
        "worker_task_progress": wire.task_progress(JOB, LEASE, 40, "resizing"),
        "request_status": wire.request(3, {"Status": {"job_id": JOB}}),
        "request_workers": wire.request(8, "Workers"),
        "request_cancel": wire.request(9, {"Cancel": {"job_id": JOB}}),
        "request_requeue": wire.request(10, {"Requeue": {"job_id": JOB}}),
        "request_ping": wire.request(16, "Ping"),
    }
    for name, message in sent.items():
        assert wire.pack(message) == golden(name), name


def test_a_submission_matches_the_golden_submit_and_batch() -> None:
    full = Submission(
        "resize",
        {"n": 7},
        priority="high",
        max_attempts=5,
        timeout_ms=60_000,
        delay=1.5,
        idempotency_key="order-42",
    )
    plain = Submission("echo", {"n": 7})
    assert wire.pack(wire.request(1, {"Submit": _submission(full)})) == golden("request_submit")
    batch = wire.array_of_packed([wire.pack(_submission(full)), wire.pack(_submission(plain))])
    assert wire.request_packed(2, "SubmitBatch", batch) == golden("request_submit_batch")


def test_a_failed_result_has_the_rust_shape() -> None:
    # TaskOutcome::Failed { error, retryable } as rmp_serde writes it.
    body = wire.unpack(wire.pack(wire.task_failed(JOB, LEASE, "boom", False)))
    assert body == {
        "TaskResult": {
            "job_id": JOB,
            "lease": LEASE,
            "outcome": {"Failed": {"error": "boom", "retryable": False}},
        }
    }


def test_answers_read_into_views() -> None:
    _, response = wire.variant(wire.unpack(golden("response_job")))
    kind, job = wire.variant(response["response"])
    assert kind == "Job"
    view = JobView.from_wire(job)
    assert view.job_id == "01938f2a-5c10-7d21-8a4e-001122334401"
    assert view.state == "RUNNING" and view.payload_value() == {"n": 7}
    assert view.progress is not None and view.progress.percent == 40
    assert view.history[0].outcome == {"kind": "failed", "error": "timed out"}
    assert view.idempotency_key == "schedule:resize-nightly:2025-12-04T00:00:00Z"
    assert (view.schedule, view.schedule_slot) == ("resize-nightly", 1_764_806_400_000)

    _, response = wire.variant(wire.unpack(golden("response_jobs")))
    _, page = wire.variant(response["response"])
    summary = JobSummary.from_wire(page["jobs"][0])
    assert summary.progress_percent == 40 and page["next"].startswith("41.")
    assert (summary.schedule, summary.schedule_slot) == ("resize-nightly", 1_764_806_400_000)

    _, response = wire.variant(wire.unpack(golden("response_workers")))
    _, workers = wire.variant(response["response"])
    assert WorkerView.from_wire(workers[0]).capacity == 8

    _, assign = wire.variant(wire.unpack(golden("to_worker_task_assign")))
    assert assign["attempt"] == 2 and assign["epoch"] == 3
