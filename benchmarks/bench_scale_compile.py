"""A TORCH_TRACE folder of thousands of ranks: ``explorer read`` beside the serial reader it replaced.

    python benchmarks/bench_scale_compile.py [--ranks 1024 4096] [--repeat 1] [--run DIR]
        [--old REV] [--work DIR] [--keep]

The job is one real recording (``explorer.compile.runtime.example_job``'s ``diverge``: two gloo
ranks under real ``torch.compile`` with ``TORCH_TRACE`` set; rank 1 recompiles its forward on a
size guard), recorded here unless ``--run`` names one, replicated to ``ranks`` logs by
``tests/replicated_compile.py`` with two planted outlier ranks. Then, alternating ``--repeat``
times, each in a child process timed by ``wait4`` (wall, CPU of the child and the workers it
started, largest resident process):

- ``explorer read JOB --json`` (every core for a job this size) and ``--workers 1``;
- the peer: ``explorer read JOB`` of ``--old REV`` (default: where this branch left ``main``),
  run from a copy of that revision's ``explorer/``: it read every log serially into Python
  objects and printed every rank by number.
  tlparse (the PyTorch team's TORCH_TRACE reader) is not installed here, and reads one rank's log
  per run into an HTML report: it answers another question.

The new answer is checked: the planted ranks, and nobody else, are named.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import replicated_compile  # noqa: E402  (the generator is test code, shared with tests/compile)
from child_time import timed  # noqa: E402  (beside this script)


def record(out: Path) -> Path:
    """The real two-rank recording, in ``out``."""
    code = "import sys; from explorer.compile.runtime.example_job import record; "
    code += "record('diverge', sys.argv[1], iterations=6, at=3)"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=_env(REPO))
    return out


def _env(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(root)}


def old_tree(rev: str, into: Path) -> Path | None:
    """``explorer/`` as it was at ``rev``, copied into ``into`` (None when git cannot give it)."""
    try:
        data = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev, "explorer"], check=True, capture_output=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=data, check=True)
    return into


def _check(doc: dict, planted: set[int]) -> None:
    named = {r for g in doc["groups"][1:] for a, b in g["ranks"] for r in range(a, b + 1)}
    if named != planted:
        raise SystemExit(f"named {sorted(named)}, planted {sorted(planted)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--run", type=Path, default=None, help="a recorded diverge job's folder")
    ap.add_argument("--old", default="", help="the revision whose serial reader is the peer")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-compile-"))
    work.mkdir(parents=True, exist_ok=True)
    run = args.run or record(work / "recorded")
    rev = (
        args.old
        or subprocess.run(
            ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True
        ).stdout.strip()
    )
    old = old_tree(rev, work / "old") if rev else None
    print(f"# {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}, peer {rev[:9]}")
    print("| ranks | MB of logs | reader | wall s | CPU s | largest process MB | output lines |")
    print("|---|---|---|---|---|---|---|")
    for ranks in args.ranks:
        job = work / f"job{ranks}"
        planted = {ranks // 8 + 5, 3 * ranks // 4 + 1}
        shutil.rmtree(job, ignore_errors=True)
        replicated_compile.replicate(run, job, ranks, planted)
        mb = sum(f.stat().st_size for f in job.iterdir()) / 2**20
        base = [sys.executable, "-m", "explorer.cli", "read", str(job)]
        readers = [("explorer read (every core)", base + ["--json"], REPO)]
        readers.append(("explorer read --workers 1", base + ["--json", "--workers", "1"], REPO))
        if old is not None:
            readers.append((f"explorer read of {rev[:9]} (serial)", base, old))
        for _ in range(args.repeat):
            for name, cmd, root in readers:
                text, wall, cpu, rss = timed(
                    cmd, _env(root), cwd=root
                )  # -m explorer takes the current folder first
                if root == REPO:
                    _check(json.loads(text), planted)
                    text = subprocess.run(
                        base, capture_output=True, text=True, env=_env(REPO)
                    ).stdout
                lines = len(text.splitlines())
                print(
                    f"| {ranks} | {mb:.0f} | {name} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {lines} |",
                    flush=True,
                )
    print(f"# load after: {os.getloadavg()}")
    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
