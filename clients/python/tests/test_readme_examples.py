"""The examples in clients/python/README.md and in the main README's Python
section run as printed (with the test coordinator's addresses): the
package's producer and worker as two processes, the main README's block as
one file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Coordinator, Processes, wait_until, workers_registered

MAIN_README_MARKER = "<!-- tested: clients/python/tests/test_readme_examples.py"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def marked_block(path: Path, marker: str) -> str:
    """The ``python`` block right after the line holding ``marker``."""
    found = re.findall(re.escape(marker) + r"[^\n]*\n```python\n(.*?)```", path.read_text(), re.S)
    assert len(found) == 1, f"{path} has one python block after {marker!r}"
    return str(found[0])


def local(code: str, coordinator: Coordinator) -> str:
    code = code.replace("127.0.0.1:7400", coordinator.client)
    return code.replace("127.0.0.1:7401", coordinator.worker)


def run_pair(
    procs: Processes, coordinator: Coordinator, producer: str, worker: str, tmp: Path
) -> str:
    worker_file, producer_file = tmp / "worker.py", tmp / "producer.py"
    worker_file.write_text(local(worker, coordinator))
    producer_file.write_text(local(producer, coordinator))
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


def test_the_main_readme_example_runs_as_one_file(coordinator: Coordinator, tmp_path: Path) -> None:
    block = marked_block(REPO / "README.md", MAIN_README_MARKER)
    example = tmp_path / "example.py"
    example.write_text(local(block, coordinator))
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'width': 320}"
    [announced] = out.stderr.splitlines()
    assert announced.startswith("taskyard worker "), out.stderr
    assert announced.endswith(f": serving resize for coordinator {coordinator.worker} (capacity 8)")
