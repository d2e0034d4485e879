"""A Python worker whose one task type, ``noop``, does nothing:
``python noop_worker.py WORKER_ADDR CAPACITY``. Runs until SIGTERM."""

from __future__ import annotations

import sys

from taskyard import TaskContext, Worker

worker = Worker(sys.argv[1], capacity=int(sys.argv[2]), drain_timeout=1.0)


@worker.task("noop")
def noop(ctx: TaskContext) -> None:
    return None


if __name__ == "__main__":
    worker.run()
