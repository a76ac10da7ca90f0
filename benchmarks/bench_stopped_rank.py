"""A rank stopped by a signal in a running ``explorer run``: from the stop to the named verdict.

What a user meets: a 4-rank run at the default settings (DeepSpeed's training schedule, 8
micro-batches, 20 s stall timeout, many iterations so it is still running), and one rank's
process stopped from outside (``kill -STOP PID``, a stray Ctrl-Z) once it has done some work.
The run is typed as a user types it (``python -m explorer run ... --json``, a fresh process);
the time is from the stop to the command's exit, and its JSON must name the stopped rank.

Side by side in one run: this tree, and the tree of ``--before REV`` (a ``git worktree`` made
for the run and removed after), which had no state-T watch: its run ends when the neighbours'
receives time out and their reports are in.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_stopped_rank.py [--before REV] [--repeat 3]

Goal (issue 24): named in under 30 s, by rank. Exits 1 when the goal is missed or a verdict on
this tree names another rank.
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
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 30.0
STOPPED_RANK = 2
RUN = ["run", "--kind", "deepspeed-train", "--stages", "4", "--microbatches", "8"]
RUN += ["--iterations", "1000", "--json"]


def _start_line(folder: Path, rank: int) -> Optional[dict]:
    path = folder / f"rank{rank}.jsonl"
    if not path.exists():
        return None
    for line in path.read_text(errors="replace").splitlines():
        if '"start"' in line:
            doc = json.loads(line)
            if doc.get("type") == "start":
                return doc
    return None


def _instructions(folder: Path, rank: int) -> int:
    path = folder / f"rank{rank}.jsonl"
    return path.read_text(errors="replace").count('"instr"') if path.exists() else 0


def one(tree: Path, folder: Path) -> tuple[float, dict]:
    """Start the run, stop rank 2 after 40 of its instructions, time the rest."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "explorer", *RUN, "--out", str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tree,
    )
    deadline = time.monotonic() + 300
    while _instructions(folder, STOPPED_RANK) < 40:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"the run ended or stalled before rank {STOPPED_RANK} worked")
        time.sleep(0.05)
    start = _start_line(folder, STOPPED_RANK)
    assert start is not None
    os.kill(int(start["pid"]), signal.SIGSTOP)
    stopped = time.monotonic()
    out, _ = proc.communicate(timeout=600)
    took = time.monotonic() - stopped
    return took, json.loads(out)["failure"] or {}


def worktree(rev: str, root: Path) -> Path:
    where = root / f"before-{rev}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    return where


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="f55f330", help="the tree without the watch (a git rev)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-stopped-"))
    before = worktree(args.before, root)
    times: dict[str, list[float]] = {"this tree": [], f"before ({args.before})": []}
    wrong = []
    try:
        for i in range(args.repeat):
            for name, tree in ((f"before ({args.before})", before), ("this tree", ROOT)):
                took, failure = one(tree, root / f"run-{name[:6]}-{i}")
                times[name].append(took)
                said = (failure.get("message") or "")[:150]
                print(f"{name:22s} #{i}: {took:6.1f} s  rank {failure.get('rank')}: {said}")
                if name == "this tree" and failure.get("rank") != STOPPED_RANK:
                    wrong.append(said)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)])
    print()
    for name, ts in times.items():
        print(
            f"{name:22s} median {statistics.median(ts):6.1f} s  (all: {', '.join(f'{t:.1f}' for t in ts)})"
        )
    ours = statistics.median(times["this tree"])
    print(f"goal: named in under {GOAL_S:.0f} s: {'met' if ours < GOAL_S else 'MISSED'}")
    return 0 if ours < GOAL_S and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
