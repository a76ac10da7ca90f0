"""Schedule core speed: build + check (matching, deadlock, buffer dataflow) + simulate.

Compared side by side, in the same run, with PyTorch's own helpers on the same 1F1B compute
order: ``_add_send_recv`` (adds the exchanges) + ``_simulate_comms_compute`` (a unit-time
dry run that finds deadlocks). Those do less than ``check``: no durations, no buffers, no
hazards. The PyTorch column is skipped when torch is absent.

    python benchmarks/bench_schedule.py [--repeat 3] [--sizes 8x32,16x128,32x512,64x1024]

Prints one row per size: best-of-N seconds for each phase, PyTorch's seconds and the ratio.
Then the path a user takes, for the largest size, in the same run: ``explorer check --kind
1f1b --stages P --microbatches M --json`` as a child process, less the start-up (``explorer
--help`` in the same interpreter, same run), and the library call ``check(build(...))`` with
its defaults (both P2P models, as the CLI does), each against PyTorch's helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

from explorer.pipeline.analysis import build, check, kernels
from explorer.pipeline.analysis.buffers import buffer_hazards, needed_buffers
from explorer.pipeline.analysis.deadlock import find_deadlock
from explorer.pipeline.analysis.p2p import match
from explorer.pipeline.analysis.timeline import Costs, simulate
from explorer.pipeline.schedules import Kind


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def ours(p: int, m: int, repeat: int) -> dict:
    t_build, schedule = best(lambda: build("1f1b", p, m), repeat)
    # check() with the schedule's own P2P model (batched), as PyTorch's helpers use one model.
    t_check, report = best(lambda: check(schedule, Costs(), other_model=False), repeat)
    t_both, _ = best(lambda: check(schedule, Costs()), repeat)
    matching = match(schedule)
    phases = {
        "match": best(lambda: match(schedule), repeat)[0],
        "deadlock": best(lambda: find_deadlock(schedule, matching, "batched"), repeat)[0],
        "hazards": best(lambda: buffer_hazards(schedule), repeat)[0],
        "needed_buffers": best(lambda: needed_buffers(schedule), repeat)[0],
        "simulate": best(lambda: simulate(schedule, matching, Costs(), "batched"), repeat)[0],
    }
    assert report.ok, "1F1B must check clean"
    return {
        "instructions": len(schedule),
        "build": t_build,
        "check": t_check,
        "check_both_models": t_both,
        "total": t_build + t_check,
        "phases": phases,
    }


def pytorch(schedule, repeat: int, clock=time.perf_counter) -> float | None:
    try:
        from torch.distributed.pipelining import schedules as S
    except ImportError:
        return None
    F, B = S._ComputationType.FORWARD, S._ComputationType.FULL_BACKWARD
    compute = {r: [] for r in range(schedule.num_ranks)}
    for i in np.nonzero(np.isin(schedule.kind, [Kind.FORWARD, Kind.BACKWARD]))[0]:
        compute[int(schedule.rank[i])].append(
            S._Action(
                int(schedule.stage[i]),
                F if schedule.kind[i] == Kind.FORWARD else B,
                int(schedule.microbatch[i]),
            )
        )
    p = schedule.num_stages

    def run():
        # _add_send_recv consumes its input lists: give each repetition a fresh copy.
        fresh = {r: list(actions) for r, actions in compute.items()}
        with_comms = S._add_send_recv(fresh, stage_to_rank=lambda s: s, num_stages=p)
        S._simulate_comms_compute(with_comms, stage_to_rank=lambda s: s, num_stages=p)

    times = []
    for _ in range(repeat):
        t0 = clock()
        run()
        times.append(clock() - t0)
    return min(times)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_seconds(args: list[str], repeat: int) -> tuple[float, float]:
    """Best-of-``repeat`` (wall, CPU) seconds of ``python -m explorer ARGS`` (output discarded).
    CPU seconds (the child's user + system time) move far less than wall seconds when the
    machine is shared."""
    cmd = [sys.executable, "-m", "explorer", *args]
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = children_cpu(), time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        walls.append(time.perf_counter() - t0)
        cpus.append(children_cpu() - c0)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-400:]}")
    return min(walls), min(cpus)


def cpu_best(fn, repeat: int) -> float:
    """Best-of-``repeat`` CPU seconds of ``fn()`` in this process."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def user_path(p: int, m: int, repeat: int) -> dict:
    """The CLI beyond start-up and the library path, side by side with PyTorch's helpers, each
    in wall seconds and in CPU seconds."""
    size = ["--kind", "1f1b", "--stages", str(p), "--microbatches", str(m), "--json"]
    out: dict = {"command": "explorer check " + " ".join(size)}
    # Start-up is the same command at the smallest size: the interpreter, the check's own
    # imports and argument parsing. `explorer --help` builds every sub-command's parser and
    # cost more than a 64 x 1024 check, which made "beyond start-up" negative.
    tiny = ["--kind", "1f1b", "--stages", "2", "--microbatches", "1", "--json"]
    startup = cli_seconds(["check", *tiny], repeat)
    command = cli_seconds(["check", *size], repeat)
    library = (
        best(lambda: check(build("1f1b", p, m)), repeat)[0],
        cpu_best(lambda: check(build("1f1b", p, m)), repeat),
    )
    with kernels.disabled():  # the same call where no C compiler built the kernels
        in_numpy = (
            best(lambda: check(build("1f1b", p, m)), repeat)[0],
            cpu_best(lambda: check(build("1f1b", p, m)), repeat),
        )
    schedule = build("1f1b", p, m)
    torch_s = pytorch(schedule, repeat)
    torch_cpu = pytorch(schedule, repeat, clock=time.process_time)
    for i, clock in enumerate(("wall", "cpu")):
        theirs = (torch_s, torch_cpu)[i]
        beyond = command[i] - startup[i]  # noise can put it under 0: then no ratio is said
        out[clock] = {
            "startup": startup[i],
            "cli": command[i],
            "cli_beyond_startup": beyond,
            "library": library[i],
            "pytorch": theirs,
            "cli_speedup": theirs / beyond if theirs and beyond > 0 else None,
            "library_speedup": theirs / library[i] if theirs else None,
            "library_numpy": in_numpy[i],
            "library_numpy_speedup": theirs / in_numpy[i] if theirs else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="8x32,16x128,32x512,64x1024")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--no-cli", action="store_true", help="skip the CLI and library path at the largest size"
    )
    args = ap.parse_args()
    rows = []
    for size in args.sizes.split(","):
        p, m = (int(x) for x in size.split("x"))
        row = {"stages": p, "microbatches": m, **ours(p, m, args.repeat)}
        row["pytorch"] = pytorch(build("1f1b", p, m), args.repeat)
        row["speedup"] = row["pytorch"] / row["total"] if row["pytorch"] else None
        rows.append(row)
    p, m = rows[-1]["stages"], rows[-1]["microbatches"]
    user = None if args.no_cli else user_path(p, m, args.repeat)
    if args.json:
        print(json.dumps({"sizes": rows, "user_path": user}, indent=1))
        return
    print(
        f"# {platform.machine()} {platform.processor() or ''} python {platform.python_version()}, best of {args.repeat}"
    )
    print(
        f"{'size':>9} {'instr':>8} {'build':>7} {'check':>7} {'total':>7} {'+other':>7} {'pytorch':>8} {'ratio':>6}  phases (match/deadlock/hazards/needed/simulate)"
    )
    for r in rows:
        ph = r["phases"]
        pt = f"{r['pytorch']:.3f}" if r["pytorch"] else "n/a"
        ratio = f"{r['speedup']:.1f}x" if r["speedup"] else "n/a"
        print(
            f"{r['stages']:>3}x{r['microbatches']:<5} {r['instructions']:>8} {r['build']:7.3f} {r['check']:7.3f} "
            f"{r['total']:7.3f} {r['check_both_models'] - r['check']:7.3f} {pt:>8} {ratio:>6}  "
            + "/".join(
                f"{ph[k]:.3f}"
                for k in ("match", "deadlock", "hazards", "needed_buffers", "simulate")
            )
        )
    base = rows[0]
    for r in rows[1:]:
        growth = r["total"] / base["total"]
        size = r["instructions"] / base["instructions"]
        print(
            f"# {r['stages']}x{r['microbatches']}: {size:.0f}x the instructions of {base['stages']}x{base['microbatches']}, {growth:.0f}x the time"
        )
    if user:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"# the user's path at {p}x{m}, best of {args.repeat}, load average {load}")
        print(f"#   {user['command']}")
        for clock in ("wall", "cpu"):
            u = user[clock]
            print(
                f"#   {clock}: CLI {u['cli']:.3f} s, start-up (the same check at 2 x 1) {u['startup']:.3f} s"
            )
            pt = u["pytorch"]
            for name, secs, ratio, goal in (
                ("CLI beyond start-up", u["cli_beyond_startup"], u["cli_speedup"], 10),
                ("library check(build(...))", u["library"], u["library_speedup"], 20),
                (
                    "the same without the C kernels",
                    u["library_numpy"],
                    u["library_numpy_speedup"],
                    20,
                ),
            ):
                verdict = "n/a" if ratio is None else ("met" if ratio >= goal else "MISSED")
                said = "n/a" if ratio is None else f"{ratio:.1f}x"
                print(
                    f"#   {clock}: {name}: {secs:.3f} s vs PyTorch's helpers "
                    f"{pt if pt is None else round(pt, 3)} s: {said} (goal {goal}x: {verdict})"
                )


if __name__ == "__main__":
    main()
