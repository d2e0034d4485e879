"""Celery 5 on Redis, on the workload of taskyard_bench.py: a backlog of
``--jobs`` no-op tasks sent with ``apply_async``, then one worker with 8
threads (``--pool threads --concurrency 8``) drains it.

    python bench/celery_bench.py --jobs 20000 --runs 3            # acks on receipt, no fsync
    python bench/celery_bench.py --jobs 20000 --runs 3 --durable  # appendfsync always, acks_late

Needs redis-server (Debian: redis-server) and celery[redis] (PyPI). The
drain rate is tasks finished per second between the first and the last
(timed inside the worker); the producer's rate and CPU time per
``apply_async`` are timed around the sending loop.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(args: argparse.Namespace, run: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        port = free_port()
        redis_args = ["redis-server", "--port", str(port), "--dir", d, "--save", ""]
        redis_args += (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if args.durable
            else ["--appendonly", "no"]
        )
        redis = subprocess.Popen(redis_args, stdout=subprocess.DEVNULL)
        done_file = tmp / "done"
        env = {
            **os.environ,
            "BENCH_BROKER": f"redis://127.0.0.1:{port}/0",
            "BENCH_JOBS": str(args.jobs),
            "BENCH_DONE_FILE": str(done_file),
            "BENCH_ACKS_LATE": "1" if args.durable else "0",
            "PYTHONPATH": str(HERE),
        }
        worker = None
        try:
            time.sleep(0.3)
            sys.path.insert(0, str(HERE))
            import celery_app

            app = celery_app.make_app(env["BENCH_BROKER"], args.durable)
            noop = app.tasks["noop"]
            noop.apply_async()  # connect before timing
            cpu0, t0 = time.process_time(), time.perf_counter()
            for _ in range(args.jobs - 1):
                noop.apply_async()
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            submit_rate = (args.jobs - 1) / elapsed
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "celery_app",
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "8",
                    "--loglevel",
                    "ERROR",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 600
            while not done_file.exists() or not done_file.read_text().endswith("\n"):
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError("the celery worker did not finish")
                time.sleep(0.05)
            first, last = map(float, done_file.read_text().split())
            drain_rate = (args.jobs - 1) / (last - first)
            us_per_send = cpu / (args.jobs - 1) * 1e6
            print(
                f"run {run}: apply_async {submit_rate:,.0f} jobs/s "
                f"({us_per_send:.0f} us CPU each), "
                f"drain {drain_rate:,.0f} jobs/s ({'durable' if args.durable else 'default'})",
                flush=True,
            )
            return submit_rate, drain_rate, us_per_send
        finally:
            if worker is not None:
                worker.kill()
                worker.wait()
            redis.terminate()
            redis.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--durable", action="store_true", help="Redis appendfsync always and task_acks_late"
    )
    args = parser.parse_args()
    results = [run_once(args, i + 1) for i in range(args.runs)]
    rate, drain, cpu = (statistics.median(r[i] for r in results) for i in (0, 1, 2))
    print(
        f"median of {args.runs}: apply_async {rate:,.0f} jobs/s ({cpu:.0f} us CPU each), "
        f"drain {drain:,.0f} jobs/s"
    )


if __name__ == "__main__":
    main()
