"""A Python worker of no-op task types, ``noop`` and ``echo`` (returns the
payload's ``message``, as the Rust worker's does):
``python noop_worker.py WORKER_ADDR CAPACITY [PREFETCH]``. Runs until SIGTERM."""

from __future__ import annotations

import sys

from taskyard import TaskContext, Worker

prefetch = int(sys.argv[3]) if len(sys.argv) > 3 else 0
worker = Worker(sys.argv[1], capacity=int(sys.argv[2]), prefetch=prefetch, drain_timeout=1.0)


@worker.task("noop")
def noop(ctx: TaskContext) -> None:
    return None


@worker.task("echo")
def echo(ctx: TaskContext) -> bytes:
    return b""  # the bench sends an empty message


if __name__ == "__main__":
    worker.run()
