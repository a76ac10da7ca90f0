"""Benchmark: ``explorer hlo-diff A B --json`` on real ~35,000-instruction modules vs difflib.

Two pairs are held out from the tests (``benchmarks/hlo_pair.py`` makes them once into
``benchmarks/data/`` with real torch_xla 2.9): the ``--xla_dump_to`` files of a 64-layer
transformer encoder's training step and the same with one GELU layer in the middle (the change
renumbers everything after it, so ``difflib`` is not handed a pure insertion), and the first and
steady AdamW step of a 40-layer GPT-style decoder as ``_get_xla_tensors_hlo`` prints them
(inline operand shapes). The committed test pair (first vs steady step, pure insertion) runs
too, for reference. ``--baseline-code DIR`` also times the same command with another checkout's
code first on the path (the code before a change), in the same run and under the same load.

The structural side is the command a user types, in a fresh process each time, timed from
spawn to exit (wall and the child's CPU) with its peak RSS from ``wait4``. The baseline,
``difflib.unified_diff`` on the canonical texts of the same pair, runs in this process in the
same invocation (canonicalisation is not counted against it). Other jobs share this machine,
so both clocks are printed: the CPU-time ratio is the one load does not distort.

    .venv/bin/python benchmarks/bench_hlo_diff.py [--repeat 5] [--baseline-code DIR] [--python-too]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from hlo_pair import ensure_adamw_pair, ensure_pair  # noqa: E402

COMMITTED = (
    os.path.join(ROOT, "tests", "data", "hlo", "encoder_large_step1.hlo.txt.gz"),
    os.path.join(ROOT, "tests", "data", "hlo", "encoder_large_step2.hlo.txt.gz"),
)


def _diff_of(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "ok"}


def cli_once(a: str, b: str, code: str = ROOT, no_kernels: bool = False) -> dict:
    """One ``explorer hlo-diff A B --json`` in a fresh process: wall, CPU, peak RSS, result.

    ``no_kernels`` runs it without the compiled loops (EXPLORER_NO_KERNELS=1: the Python path a
    machine without a C compiler runs)."""
    env = dict(os.environ, PYTHONPATH=code)
    env.pop("EXPLORER_NO_KERNELS", None)
    if no_kernels:
        env["EXPLORER_NO_KERNELS"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "explorer", "hlo-diff", a, b, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=code,
    )
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    # communicate() reaped the child; its rusage is in RUSAGE_CHILDREN, read as a delta.
    if proc.returncode not in (0, 1):
        raise SystemExit(f"hlo-diff failed ({proc.returncode}): {err.decode()[-400:]}")
    return {"wall_s": wall, "json": json.loads(out)}


def compile_bytecode(codes: list[str]) -> None:
    """Write each code tree's bytecode before anything is timed.

    An installed package runs from its ``.pyc`` files. Where ``PYTHONDONTWRITEBYTECODE`` is set
    (as on the machine these figures were taken on) no run writes them, and every timed process
    compiled each module's source again: 30-40 ms of a 0.3 s command that a user never pays.
    """
    import compileall

    for code in codes:
        compileall.compile_dir(os.path.join(code, "explorer"), quiet=1)


def structural(a: str, b: str, repeat: int, codes: list[tuple[str, bool]]) -> list[dict]:
    """Per (code tree, without kernels): best wall and best CPU of ``repeat`` CLI runs, the
    largest peak RSS.

    With several trees the runs alternate (this code, the other, this code, ...), so a burst of
    load from other jobs falls on both alike.
    """
    walls: list[list[float]] = [[] for _ in codes]
    cpus: list[list[float]] = [[] for _ in codes]
    rss: list[float] = [0.0 for _ in codes]
    results: list = [None for _ in codes]
    for _ in range(repeat):
        for k, (code, no_kernels) in enumerate(codes):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run = cli_once(a, b, code, no_kernels)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            walls[k].append(run["wall_s"])
            cpus[k].append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
            # ru_maxrss of the children is the largest so far: it moves only when this run set it
            # (otherwise the figure is an upper bound, an earlier child having peaked higher).
            if after.ru_maxrss > before.ru_maxrss or not rss[k]:
                rss[k] = max(rss[k], after.ru_maxrss / 1024)
            results[k] = run["json"]
    return [
        {"wall_s": min(w), "cpu_s": min(c), "rss_mb": r, "json": j}
        for w, c, r, j in zip(walls, cpus, rss, results)
    ]


def baseline(a: str, b: str, repeat: int) -> dict:
    """difflib on the canonical texts: best wall and CPU of ``repeat`` runs."""
    from explorer.xla.hlo import canonical_text, read_modules

    ta = canonical_text(read_modules(a)[0]).splitlines()
    tb = canonical_text(read_modules(b)[0]).splitlines()
    walls, cpus, n = [], [], 0
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        n = sum(1 for _ in difflib.unified_diff(ta, tb, lineterm="", n=0))
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": min(walls), "cpu_s": min(cpus), "lines": n, "canonical": (len(ta), len(tb))}


def report(
    label: str, a: str, b: str, repeat: int, baseline_code: str | None, python_too: bool
) -> bool:
    """Print one pair's figures; return whether the goals are met on it."""
    load = os.getloadavg()[0]
    codes = [(ROOT, False)] + ([(baseline_code, False)] if baseline_code else [])
    runs = structural(a, b, repeat, codes + ([(ROOT, True)] if python_too else []))
    s = runs[0]
    d = baseline(a, b, max(1, repeat // 2))
    j = s["json"]
    print(f"{label}: {os.path.basename(a)} vs {os.path.basename(b)} (load average {load:.1f})")
    print(
        f"  instructions {j['instructions'][0]} / {j['instructions'][1]}, matched {j['matched_count']}"
    )
    print(
        f"  explorer hlo-diff --json: wall {s['wall_s']:.2f} s, CPU {s['cpu_s']:.2f} s, "
        f"peak RSS {s['rss_mb']:.0f} MB"
    )
    if baseline_code:
        old = runs[1]
        # older code printed no "ok" (the exit code's verdict, added later): the diff is compared
        same = "same JSON" if _diff_of(old["json"]) == _diff_of(j) else "DIFFERENT JSON"
        print(
            f"  the same with {baseline_code}: wall {old['wall_s']:.2f} s, CPU {old['cpu_s']:.2f} s "
            f"({old['cpu_s'] / s['cpu_s']:.1f}x this code's CPU; {same})"
        )
    if python_too:
        py = runs[-1]
        same = "same JSON" if py["json"] == j else "DIFFERENT JSON"
        print(
            f"  the same without the compiled loops (EXPLORER_NO_KERNELS=1): wall "
            f"{py['wall_s']:.2f} s, CPU {py['cpu_s']:.2f} s ({same})"
        )
    print(
        f"  difflib on canonical texts ({d['canonical'][0]} / {d['canonical'][1]} lines): "
        f"wall {d['wall_s']:.2f} s, CPU {d['cpu_s']:.2f} s, {d['lines']} diff lines"
    )
    wall_ratio, cpu_ratio = d["wall_s"] / s["wall_s"], d["cpu_s"] / s["cpu_s"]
    print(f"  ratio difflib / hlo-diff: wall {wall_ratio:.1f}x, CPU {cpu_ratio:.1f}x")
    print(f"  summary: {j['summary'][:300]}")
    print(f"  load average after: {os.getloadavg()[0]:.1f}")
    return s["wall_s"] < 1.0 and s["rss_mb"] < 500 and max(wall_ratio, cpu_ratio) >= 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--baseline-code",
        metavar="DIR",
        help="also time the command with this checkout's code first on the path",
    )
    parser.add_argument(
        "--python-too",
        action="store_true",
        help="also time this code without its compiled loops (EXPLORER_NO_KERNELS=1)",
    )
    args = parser.parse_args()
    pairs = [("held-out pair 1", ensure_pair()), ("held-out pair 2", ensure_adamw_pair())]
    compile_bytecode([ROOT] + ([args.baseline_code] if args.baseline_code else []))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    met = [
        report(label, *pair, args.repeat, args.baseline_code, args.python_too)
        for label, pair in pairs
    ]
    report(
        "committed pair (reference)", *COMMITTED, args.repeat, args.baseline_code, args.python_too
    )
    for (label, _), ok in zip(pairs, met):
        print(f"targets on {label} (< 1 s, < 500 MB, >= 10x difflib):", "met" if ok else "NOT met")
    sys.exit(0 if all(met) else 1)


if __name__ == "__main__":
    main()
