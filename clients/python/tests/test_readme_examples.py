"""The examples in clients/python/README.md and in the main README's Python
section run as printed (with the test coordinator's addresses)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Coordinator, Processes, wait_until, workers_registered


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def run_pair(
    procs: Processes, coordinator: Coordinator, producer: str, worker: str, tmp: Path
) -> str:
    def local(code: str) -> str:
        code = code.replace("127.0.0.1:7400", coordinator.client)
        return code.replace("127.0.0.1:7401", coordinator.worker)

    worker_file, producer_file = tmp / "worker.py", tmp / "producer.py"
    worker_file.write_text(local(worker))
    producer_file.write_text(local(producer))
    log = open(tmp / "example-worker.log", "wb")  # noqa: SIM115
    procs.started.append(
        subprocess.Popen([sys.executable, str(worker_file)], stdout=log, stderr=subprocess.STDOUT)
    )
    with coordinator.client_for() as client:
        wait_until("the example worker registered", workers_registered(client, 1))
    out = subprocess.run(
        [sys.executable, str(producer_file)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_package_readme_examples_run(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    producer, worker = python_blocks(REPO / "clients" / "python" / "README.md")[:2]
    assert len(producer.strip().splitlines()) <= 10
    assert len(worker.strip().splitlines()) <= 15
    out = run_pair(procs, coordinator, producer, worker, tmp_path)
    assert out.strip() == "{'width': 640, 'attempt': 1}"


def test_the_main_readme_example_runs(
    procs: Processes, coordinator: Coordinator, tmp_path: Path
) -> None:
    [block] = [b for b in python_blocks(REPO / "README.md") if "from taskyard import" in b]
    imports, rest = block.split("\n", 1)
    producer, worker = rest.split("worker = Worker(")
    out = run_pair(
        procs, coordinator, imports + producer, imports + "\nworker = Worker(" + worker, tmp_path
    )
    assert out.strip() == "{'width': 320}"
