"""Each test's CPU: the pytest worker's own and its reaped children's, per phase.

On a machine that the suite keeps busy, wall time per test (``--durations``) says how long a
test waited, not what it cost the others. This pytest plugin writes one JSON line per test phase
(setup, call, teardown): the worker's own CPU and the CPU of the children it reaped meanwhile
(``RUSAGE_CHILDREN``: a torchrun's ranks count once torchrun has waited for them, a JupyterLab
kernel's jobs once its server ends, so a long-lived process is charged to the phase that ends
it). ``--read`` sums the lines by test file and lists the costliest phases.

    CPU_OUT=cpu.jsonl PYTHONPATH=benchmarks .venv/bin/python -m pytest -n 3 -p per_test_cpu
    .venv/bin/python benchmarks/per_test_cpu.py --read cpu.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
from typing import Iterator

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _measured(item: pytest.Item, phase: str) -> Iterator[None]:
    out = os.environ.get("CPU_OUT")
    start, (own0, children0) = time.time(), _cpu()
    yield
    if not out:
        return
    own1, children1 = _cpu()
    line = {
        "id": item.nodeid,
        "phase": phase,
        "self": own1 - own0,
        "children": children1 - children0,
        "wall": time.time() - start,
        "start": start,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
    }
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _measured(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _measured(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _measured(item, "teardown")


def read(path: str, top: int) -> None:
    """The totals, the costliest test files and the costliest phases."""
    with open(path, encoding="utf-8") as fh:
        lines = [json.loads(x) for x in fh if x.strip()]
    own = sum(x["self"] for x in lines)
    children = sum(x["children"] for x in lines)
    print(f"{len(lines)} phases: {own:.0f} CPU-s in the workers, {children:.0f} in their children")
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for x in lines:
        by_file[x["id"].split("::")[0]][0] += x["self"] + x["children"]
        by_file[x["id"].split("::")[0]][1] += x["wall"]
    print("\nCPU-s   wall-s  test file")
    for name, (cpu, wall) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cpu:6.1f} {wall:7.1f}  {name}")
    print("\nCPU-s   wall-s  phase")
    for x in sorted(lines, key=lambda x: -(x["self"] + x["children"]))[:top]:
        print(f"{x['self'] + x['children']:6.1f} {x['wall']:7.1f}  {x['phase']:8} {x['id']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", required=True, help="the JSON lines a run wrote (CPU_OUT)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    read(args.read, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
