"""The Celery side of the comparison: one no-op task on a Redis broker.
Configured by the environment (set by celery_bench.py): BENCH_BROKER,
BENCH_JOBS, BENCH_DONE_FILE, BENCH_ACKS_LATE. The worker counts finished
tasks in memory and, at the last one, writes the times of the first and the
last to BENCH_DONE_FILE."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from celery import Celery
from celery.signals import task_postrun

_lock = threading.Lock()
_count = 0
_first = 0.0


def make_app(broker: str, acks_late: bool) -> Celery:
    """A Celery app on ``broker`` with the one task, ``noop``."""
    app = Celery("bench", broker=broker)
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=acks_late,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
    )
    app.task(name="noop")(noop)
    return app


def noop() -> None:
    return None


app = make_app(os.environ.get("BENCH_BROKER", ""), os.environ.get("BENCH_ACKS_LATE") == "1")


@task_postrun.connect
def counted(**_: Any) -> None:
    global _count, _first
    with _lock:
        _count += 1
        if _count == 1:
            _first = time.time()
        if _count == int(os.environ["BENCH_JOBS"]):
            with open(os.environ["BENCH_DONE_FILE"], "w") as f:
                f.write(f"{_first} {time.time()}\n")
