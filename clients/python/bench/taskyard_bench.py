"""No-op throughput of the Python package against a real coordinator.

    python bench/taskyard_bench.py --bin-dir ../../target/release --jobs 50000 --runs 3

Each run starts a fresh coordinator (SQLite, synchronous FULL: every
commit fsynced) on free ports and measures, in this order:

* submit: ``Client.submit_many`` of ``--jobs`` no-op jobs from one client
  (first frame written to last id returned), no worker connected;
* drain: then one Python worker process (``--capacity`` handler threads)
  is started on that backlog; the rate is jobs SUCCEEDED (durable) per
  second between the first and the last success, read from the
  coordinator's counts every 20 ms.

The jobs are the built-in ``echo`` with an empty message (a no-op the
Rust worker has too: ``--rust-worker PATH`` runs that instead, for
comparison). Prints one line per run, with the worker process's CPU time
per job, and the medians.
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

from taskyard import Client, Unreachable

HERE = Path(__file__).resolve().parent
WORKER = HERE / "noop_worker.py"
EXTRA: list[str] = []
"""More coordinator flags (``--coordinator-arg``)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_coordinator(
    bin_dir: Path, tmp: Path, jobs: int
) -> tuple[subprocess.Popen[bytes], str, str]:
    client, worker, http = (f"127.0.0.1:{free_port()}" for _ in range(3))
    command = [
        str(bin_dir / "taskyard-coordinator"),
        "--db-path",
        str(tmp / "bench.db"),
        "--client-listen",
        client,
        "--worker-listen",
        worker,
        "--http-listen",
        http,
        "--max-active-jobs",
        str(max(100_000, jobs * 2)),
        "--log-level",
        "error",
        *EXTRA,
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            Client(client, timeout=5).close()
            return process, client, worker
        except Unreachable:
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            time.sleep(0.05)


def process_cpu(pid: int) -> float:
    """User plus system CPU seconds of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def run_once(args: argparse.Namespace, run: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        coordinator, client_addr, worker_addr = start_coordinator(args.bin_dir, tmp, args.jobs)
        worker = None
        try:
            with Client(client_addr, timeout=60) as client:
                jobs = [("echo", {"message": ""})] * args.jobs
                t0 = time.perf_counter()
                ids = client.submit_many(jobs)
                submit_rate = len(ids) / (time.perf_counter() - t0)

                if args.rust_worker:
                    command = [
                        str(args.rust_worker),
                        "--coordinator",
                        worker_addr,
                        "--capacity",
                        str(args.capacity),
                        "--prefetch",
                        str(args.prefetch),
                        "--log-level",
                        "error",
                    ]
                else:
                    command = [sys.executable, str(WORKER), worker_addr]
                    command += [str(args.capacity), str(args.prefetch)]
                worker = subprocess.Popen(command)
                first_at = None
                first_count = 0
                while True:
                    done = client.counts().get("SUCCEEDED", 0)
                    now = time.perf_counter()
                    if first_at is None and done > 0:
                        first_at, first_count = now, done
                    if done >= args.jobs:
                        break
                    time.sleep(0.02)
                assert first_at is not None
                drain_rate = (done - first_count) / max(now - first_at, 1e-9)
                cpu = process_cpu(worker.pid)
            print(
                f"run {run}: submit_many {submit_rate:,.0f} jobs/s, "
                f"drain {drain_rate:,.0f} jobs/s ({args.jobs} jobs, capacity {args.capacity}, "
                f"prefetch {args.prefetch}, "
                f"{'Rust' if args.rust_worker else 'Python'} worker CPU "
                f"{cpu / args.jobs * 1e6:.0f} us per job)",
                flush=True,
            )
            return submit_rate, drain_rate
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait()
            coordinator.terminate()
            coordinator.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_bin = Path(os.environ.get("TASKYARD_BIN_DIR", HERE.parents[2] / "target" / "release"))
    parser.add_argument("--bin-dir", type=Path, default=default_bin)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=0, help="the worker's prefetch")
    parser.add_argument(
        "--rust-worker",
        type=Path,
        help="run this taskyard-worker binary instead of the Python worker (for comparison)",
    )
    parser.add_argument(
        "--coordinator-arg",
        action="append",
        default=[],
        help="a flag for the coordinator, e.g. --coordinator-arg=--sqlite-synchronous=normal",
    )
    args = parser.parse_args()
    EXTRA.extend(args.coordinator_arg)
    results = [run_once(args, i + 1) for i in range(args.runs)]
    submits = [s for s, _ in results]
    drains = [d for _, d in results]
    print(
        f"median of {args.runs}: submit_many {statistics.median(submits):,.0f} jobs/s, "
        f"drain {statistics.median(drains):,.0f} jobs/s"
    )


if __name__ == "__main__":
    main()
