"""A Python worker process for the tests: ``python worker_main.py
--coordinator ADDR [options]``. Its handlers write one line per event
(``started JOB``, ``finished JOB``, ``cancelled JOB``) to ``--events``.

Task types: ``noop`` (returns nothing), ``echo`` (returns
``payload["message"]``, like the Rust worker's), ``py.slow`` (sleeps
``millis`` in steps, reporting progress and honouring cancellation),
``py.cpu`` (a pure-Python loop for ``seconds``), ``py.fail`` (raises
``Permanent`` or ``Retryable`` as ``payload["kind"]`` says), ``py.attempt``
(fails until attempt ``succeed_on``, then returns the attempt number).
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any

from taskyard import Permanent, Retryable, TaskContext, Worker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--prefetch", type=int, default=0)
    parser.add_argument("--worker-id")
    parser.add_argument("--heartbeat-interval", type=float, default=0.3)
    parser.add_argument("--coordinator-timeout", type=float, default=3.0)
    parser.add_argument("--drain-timeout", type=float, default=10.0)
    parser.add_argument("--token")
    parser.add_argument("--tls-ca")
    parser.add_argument("--events")
    parser.add_argument("--types", default="noop,echo,py.slow,py.cpu,py.fail,py.attempt")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    lock = threading.Lock()
    events = open(args.events, "a", buffering=1) if args.events else None  # noqa: SIM115

    def event(kind: str, ctx: TaskContext) -> None:
        if events is not None:
            with lock:
                events.write(f"{kind} {ctx.job_id}\n")

    worker = Worker(
        args.coordinator,
        capacity=args.capacity,
        prefetch=args.prefetch,
        token=args.token,
        tls_ca=args.tls_ca,
        worker_id=args.worker_id,
        heartbeat_interval=args.heartbeat_interval,
        coordinator_timeout=args.coordinator_timeout,
        drain_timeout=args.drain_timeout,
    )

    def noop(ctx: TaskContext) -> None:
        return None

    def echo(ctx: TaskContext) -> Any:
        return ctx.payload["message"]

    def slow(ctx: TaskContext) -> str | None:
        event("started", ctx)
        millis = int(ctx.payload.get("millis", 1000))
        end = time.monotonic() + millis / 1000
        while time.monotonic() < end:
            left = end - time.monotonic()
            ctx.report_progress(int(100 * (1 - left / (millis / 1000))), "sleeping")
            if ctx.cancelled.wait(min(0.05, max(left, 0))):
                event("cancelled", ctx)
                return None
        event("finished", ctx)
        return "slept"

    def cpu(ctx: TaskContext) -> int:
        event("started", ctx)
        end = time.monotonic() + float(ctx.payload["seconds"])
        n = 0
        while time.monotonic() < end:
            for i in range(10_000):
                n += i * i % 7
        event("finished", ctx)
        return n

    def fail(ctx: TaskContext) -> None:
        if ctx.payload.get("kind") == "permanent":
            raise Permanent(str(ctx.payload.get("message", "bad payload")))
        raise Retryable(str(ctx.payload.get("message", "try again")))

    def attempt(ctx: TaskContext) -> int:
        if ctx.attempt < int(ctx.payload["succeed_on"]):
            raise Retryable(f"attempt {ctx.attempt} fails")
        return ctx.attempt

    handlers = {
        "noop": noop,
        "echo": echo,
        "py.slow": slow,
        "py.cpu": cpu,
        "py.fail": fail,
        "py.attempt": attempt,
    }
    for name in args.types.split(","):
        worker.add_task(name, handlers[name])
    worker.run()


if __name__ == "__main__":
    main()
