"""How busy the machine is while the suite runs, and which tests were running when it was not.

The census (``suite_census.py``) says what CPU each process took; this says whether the cores
were idle at all. It samples ``/proc/stat`` once a second while the suite runs, with a plugin
in every pytest-xdist worker that writes each test's start and end, then prints the busy and
idle core-seconds, the idle core-seconds per minute, and the tests that were running while a
core stood idle (each second's idle share split among them). When the machine is busy nearly
all the time, only CPU cut shortens the suite; idle seconds point at tests that wait.

    .venv/bin/python benchmarks/suite_busy.py -- -n 3
    .venv/bin/python benchmarks/suite_busy.py --read OUT_DIR

Counts the whole machine: run it with nothing else running.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable

PLUGIN = """
import os, time
_OUT = os.environ.get("SUITE_BUSY_OUT")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")

def _write(kind, nodeid):
    if _OUT:
        with open(_OUT, "a") as out:
            out.write(f"{time.time():.3f}\\t{_WORKER}\\t{kind}\\t{nodeid}\\n")

def pytest_runtest_logstart(nodeid, location):
    _write("start", nodeid)

def pytest_runtest_logfinish(nodeid, location):
    _write("end", nodeid)
"""


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot; steal counts as neither."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, _steal = fields
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait


def _sample(out: Path, stop: threading.Event) -> None:
    with out.open("w") as f:
        while not stop.is_set():
            busy, total = _cpu_jiffies()
            f.write(f"{time.time():.3f} {busy} {total}\n")
            f.flush()
            stop.wait(1.0)


def run_suite(out: Path, pytest_args: list[str]) -> int:
    """The suite with the plugin in every worker, ``/proc/stat`` sampled beside it."""
    (out / "suite_busy_plugin.py").write_text(PLUGIN)
    events = out / "events.tsv"
    events.unlink(missing_ok=True)
    path = os.pathsep.join(p for p in (str(out), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "SUITE_BUSY_OUT": str(events), "PYTHONPATH": path}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(out / "stat.txt", stop), daemon=True)
    sampler.start()
    try:
        cmd = [sys.executable, "-m", "pytest", "-p", "suite_busy_plugin", *pytest_args]
        return subprocess.run(cmd, env=env).returncode
    finally:
        stop.set()
        sampler.join()


def _intervals(events: Path) -> list[tuple[float, float, str]]:
    """(start, end, test) of every test that ended."""
    started: dict[str, tuple[float, str]] = {}
    done = []
    for line in events.read_text().splitlines():
        t, worker, kind, nodeid = line.split("\t", 3)
        if kind == "start":
            started[worker] = (float(t), nodeid)
        elif worker in started:
            begin, test = started.pop(worker)
            done.append((begin, float(t), test))
    return done


def report(out: Path, cores: int) -> Iterable[str]:
    tests = _intervals(out / "events.tsv")
    samples = [
        tuple(map(float, line.split())) for line in (out / "stat.txt").read_text().splitlines()
    ]
    t0, t1 = min(s for s, _, _ in tests), max(e for _, e, _ in tests)
    busy_s = idle_s = 0.0
    by_test: collections.Counter[str] = collections.Counter()
    by_minute: collections.Counter[int] = collections.Counter()
    for (ta, ba, aa), (tb, bb, ab) in zip(samples, samples[1:]):
        if tb < t0 or ta > t1 or ab <= aa:
            continue
        share = (bb - ba) / (ab - aa)
        seconds = (tb - ta) * cores
        busy_s, idle_s = busy_s + share * seconds, idle_s + (1 - share) * seconds
        by_minute[int((ta - t0) // 60)] += (1 - share) * seconds
        middle = (ta + tb) / 2
        running = [test for s, e, test in tests if s <= middle < e]
        for test in running:
            by_test[test] += (1 - share) * seconds / len(running)
    yield f"{len(tests)} tests in {t1 - t0:.0f} s on {cores} cores"
    yield f"busy {busy_s:.0f} core-seconds ({busy_s / max(busy_s + idle_s, 1e-9):.0%}), idle {idle_s:.0f}"
    yield "idle core-seconds per minute: " + " ".join(
        f"{by_minute[m]:.0f}" for m in sorted(by_minute)
    )
    yield "\ntests running while a core stood idle (their share of it, the 20 largest)"
    for test, seconds in by_test.most_common(20):
        yield f"{seconds:7.1f} s  {test}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="where the samples and events go (a new temporary folder)"
    )
    parser.add_argument(
        "--read", type=Path, help="only print the report of an earlier run's folder"
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    if args.read:
        print("\n".join(report(args.read, cores)))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="suite-busy-"))
    out.mkdir(parents=True, exist_ok=True)
    code = run_suite(out, args.pytest_args)
    print(f"pytest exited {code}; samples and events in {out}")
    print("\n".join(report(out, cores)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
