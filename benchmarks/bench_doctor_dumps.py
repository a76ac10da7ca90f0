"""``explorer doctor DIR`` on a job's Flight Recorder dumps: from the request to the verdict, 4 and 8 ranks.

For each size a real gloo job (CPU) is started in which rank 1 calls one more ``all_reduce``
than the others, who go on to a ``barrier``; gloo's 10 s timeout fires in every rank, and each
dumps its own Flight Recorder buffer (``_dump_fr_trace``) to ``DIR/fr_<rank>`` (gloo does not
dump by itself). Once every rank has ended, ``python -m explorer doctor DIR --json`` is timed
``--repeat`` times in a fresh interpreter (``cli``), and the reading and alignment in this
process (``call``). Each verdict is checked: collective #8 on the default group, rank 1's 8th
``all_reduce`` against the others' ``barrier``.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_doctor_dumps.py [--ranks 4,8] [--repeat 5]

Exits 1 when the goal (under 5 s for 8 ranks) is missed or a verdict is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from explorer.pipeline.runtime.doctor import doctor
from explorer.processes import free_port, rank_env

GOAL_S = 5.0
JOB = """
import datetime, os, sys, torch, torch.distributed as dist
import torch._C._distributed_c10d as c10d
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
rank = dist.get_rank()
grad = torch.ones(4)
try:
    for step in range(7 + (rank == 1)):
        dist.all_reduce(grad)
    dist.barrier()
except RuntimeError:
    with open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank), "wb") as f:
        f.write(c10d._dump_fr_trace())
"""


def dump(ranks: int, root: Path) -> Path:
    """Run the job to its end; the folder of its dumps."""
    script, out = root / "train.py", root / f"dumps-{ranks}"
    script.write_text(JOB)
    out.mkdir()
    port = free_port()
    env = {"TORCH_FR_BUFFER_SIZE": "64", "TORCH_FR_DUMP_TEMP_FILE": f"{out}/fr_"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env={**rank_env(r, ranks, port, threads=1), **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(ranks)
    ]
    for p in procs:
        p.wait(timeout=600)
    return out


def right(got: dict) -> bool:
    m = got.get("mismatch") or {}
    calls = {c["rank"]: (c["op"], c["count"]) for c in m.get("calls", [])}
    return (got.get("verdict"), m.get("seq"), calls.get(1)) == (
        "collective-mismatch",
        8,
        ("all_reduce", 8),
    )


def measure(ranks: int, repeat: int, root: Path) -> dict:
    folder = dump(ranks, root)
    cli, call, ok = [], [], True
    for _ in range(repeat):
        t0 = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "explorer", "doctor", str(folder), "--json"],
            capture_output=True,
            text=True,
        )
        cli.append(time.monotonic() - t0)
        ok &= right(json.loads(out.stdout))
        t0 = time.monotonic()
        d = doctor([], folder)
        call.append(time.monotonic() - t0)
        ok &= right(d.to_dict())
    return {"ranks": ranks, "cli": cli, "call": call, "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4,8")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("ranks  cli median (min-max)      call median (min-max)     verdict")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-doctor-dumps-") as tmp:
        for n in (int(x) for x in args.ranks.split(",")):
            r = measure(n, args.repeat, Path(tmp))
            cli, call = r["cli"], r["call"]
            print(
                f"{n:5d}  {statistics.median(cli):6.2f} s ({min(cli):.2f}-{max(cli):.2f})   "
                f"{statistics.median(call) * 1000:7.1f} ms ({min(call) * 1000:.1f}-"
                f"{max(call) * 1000:.1f})   {'right' if r['ok'] else 'WRONG'}"
            )
            failed |= not r["ok"] or (n == 8 and statistics.median(cli) > GOAL_S)
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
