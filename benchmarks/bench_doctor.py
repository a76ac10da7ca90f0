"""``explorer doctor`` on a live hung job: from the request to the verdict, for 4 and 8 ranks.

For each size a real job is started (the explorer's engine, gloo on CPU, DeepSpeed's training
schedule with one stage per rank, 2 micro-batches per stage) with rank 1 planted to sleep at
step 3 (``Fault(1, 3, "hang")``) and a 10-minute stall timeout. Once the hang is visible (every
other rank's stack shows its wait), two times are taken ``--repeat`` times:

* ``cli``: ``python -m explorer doctor LAUNCHER_PID --json`` in a fresh interpreter, from the
  start of the command to its exit: what a person waits for (interpreter start, walking the
  process tree, one py-spy per rank side by side, reading the run folder, the verdict);
* ``call``: :func:`explorer.pipeline.runtime.doctor.doctor` in this process (the same without
  the interpreter start).

Each run's verdict is checked (rank 1 is the rank everyone waits on); the job is killed after.
Goal (issue 24): under 5 s for 8 ranks on this machine.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_doctor.py [--ranks 4,8] [--repeat 5]

Exits 1 when the goal is missed or a verdict is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import Fault, RunSpec
from explorer.pipeline.runtime.doctor import doctor
from explorer.processes.stacks import tree

GOAL_S = 5.0
LAUNCHER = """
import sys, json
from explorer.pipeline.runtime import RunSpec, run_pipeline
spec = RunSpec.from_json(json.loads(open(sys.argv[2]).read()))
run_pipeline(spec, sys.argv[1], check_first=False)
"""


def launch(ranks: int, root: Path) -> subprocess.Popen:
    spec = RunSpec.for_schedule(
        build("deepspeed-train", ranks, 2 * ranks), fault=Fault(1, 3, "hang"), stall_timeout_s=600
    )
    spec_file = root / f"spec-{ranks}.json"
    spec_file.write_text(json.dumps(spec.to_json()))
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(root / f"run-{ranks}"), str(spec_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_hang(pid: int, ranks: int, limit_s: float = 600.0) -> float:
    """Seconds until every rank but 1 waits and rank 1 sleeps in its fault."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        try:
            v = doctor([pid]).verdict
        except Exception:
            v = None
        if v is not None and len(v.ranks) == ranks:
            states = {s.rank: s for s in v.ranks}
            others = all(states[r].activity == "waiting" for r in states if r != 1)
            if others and states[1].note:
                return time.monotonic() - t0
        time.sleep(1.0)
    raise SystemExit(f"{ranks} ranks: the hang never became visible in {limit_s:.0f} s")


def kill_job(launcher: subprocess.Popen) -> None:
    for p in tree(launcher.pid)[1:]:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launcher.kill()
    launcher.wait()


def measure(ranks: int, repeat: int, root: Path) -> dict:
    launcher = launch(ranks, root)
    try:
        reach = wait_for_hang(launcher.pid, ranks)
        cli, call, ok = [], [], True
        for _ in range(repeat):
            t0 = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-m", "explorer", "doctor", str(launcher.pid), "--json"],
                capture_output=True,
                text=True,
            )
            cli.append(time.monotonic() - t0)
            got = json.loads(out.stdout)
            ok &= got["verdict"] == "waits-on" and got["culprit"] == 1
            t0 = time.monotonic()
            v = doctor([launcher.pid]).verdict
            call.append(time.monotonic() - t0)
            ok &= v.culprit == 1
        return {"ranks": ranks, "reach_s": reach, "cli": cli, "call": call, "ok": ok}
    finally:
        kill_job(launcher)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4,8")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("ranks  hang-visible-after  cli median (min-max)      call median (min-max)   verdict")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as tmp:
        for n in (int(x) for x in args.ranks.split(",")):
            r = measure(n, args.repeat, Path(tmp))
            cli, call = r["cli"], r["call"]
            print(
                f"{n:5d}  {r['reach_s']:17.1f}s  {statistics.median(cli):6.2f} s "
                f"({min(cli):.2f}-{max(cli):.2f})   {statistics.median(call):6.2f} s "
                f"({min(call):.2f}-{max(call):.2f})   {'right' if r['ok'] else 'WRONG'}"
            )
            failed |= not r["ok"] or (n == 8 and statistics.median(cli) > GOAL_S)
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
