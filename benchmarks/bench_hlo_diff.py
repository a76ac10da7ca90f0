"""Benchmark: structural HLO diff of two real ~35,000-instruction modules vs difflib.

The pair is the first and the steady SGD-momentum step of a 64-layer transformer encoder,
printed by real torch_xla 2.9 (``tests/data/hlo/make_fixtures.py --large 64``). The
end-to-end run (read the gzip files, parse both, match, diff, summary) happens in a fresh
child process so its peak RSS is the whole cost; the baseline, ``difflib.unified_diff`` on the
canonical texts of the same pair, runs in the same invocation.

    .venv/bin/python benchmarks/bench_hlo_diff.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "hlo")
PAIR = (
    os.path.join(DATA, "encoder_large_step1.hlo.txt.gz"),
    os.path.join(DATA, "encoder_large_step2.hlo.txt.gz"),
)

_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from explorer.hlo import diff_modules, read_modules
a = read_modules(sys.argv[1])[0]
b = read_modules(sys.argv[2])[0]
t1 = time.perf_counter()
d = diff_modules(a, b)
t2 = time.perf_counter()
print(json.dumps({"parse_s": t1 - t0, "diff_s": t2 - t1, "total_s": t2 - t0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "instructions": [a.instruction_count, b.instruction_count],
                  "matched": d.matched_count, "added": sum(g.count for g in d.added),
                  "removed": sum(g.count for g in d.removed), "changed": len(d.changed),
                  "summary": d.summary}))
"""


def structural(repeat: int) -> dict:
    """Best of ``repeat`` fresh-process runs (timing) and the largest peak RSS seen."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, *PAIR],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        runs.append(json.loads(out.stdout))
    best = min(runs, key=lambda r: r["total_s"])
    best["rss_mb"] = max(r["rss_mb"] for r in runs)
    return best


def baseline() -> dict:
    """difflib on the canonical texts (canonicalisation itself not counted against difflib)."""
    sys.path.insert(0, ROOT)
    from explorer.hlo import canonical_text, read_modules

    ta = canonical_text(read_modules(PAIR[0])[0]).splitlines()
    tb = canonical_text(read_modules(PAIR[1])[0]).splitlines()
    t0 = time.perf_counter()
    lines = list(difflib.unified_diff(ta, tb, lineterm="", n=0))
    t1 = time.perf_counter()
    from explorer.hlo import read_text

    ra, rb = read_text(PAIR[0]).splitlines(), read_text(PAIR[1]).splitlines()
    t2 = time.perf_counter()
    raw = list(difflib.unified_diff(ra, rb, lineterm="", n=0))
    return {
        "difflib_s": t1 - t0,
        "diff_lines": len(lines),
        "canonical_lines": [len(ta), len(tb)],
        "raw_difflib_s": time.perf_counter() - t2,
        "raw_diff_lines": len(raw),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    s = structural(args.repeat)
    b = baseline()
    ratio = b["difflib_s"] / s["total_s"]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        f"pair: {os.path.basename(PAIR[0])} ({s['instructions'][0]} instructions) vs "
        f"{os.path.basename(PAIR[1])} ({s['instructions'][1]})"
    )
    print(
        f"structural, end to end: {s['total_s']:.2f} s (read+parse {s['parse_s']:.2f} s, diff {s['diff_s']:.2f} s), "
        f"peak RSS {s['rss_mb']:.0f} MB"
    )
    print(
        f"  matched {s['matched']}, added {s['added']}, removed {s['removed']}, changed {s['changed']}"
    )
    print(
        f"difflib on canonical texts ({b['canonical_lines'][0]} / {b['canonical_lines'][1]} lines): "
        f"{b['difflib_s']:.2f} s, {b['diff_lines']} unexplained diff lines"
    )
    print(
        f"difflib on the raw texts (for reference): {b['raw_difflib_s']:.2f} s, {b['raw_diff_lines']} lines"
    )
    print(f"speed-up over difflib on canonical texts: {ratio:.1f}x")
    print(f"summary: {s['summary']}")
    ok = s["total_s"] < 2.0 and s["rss_mb"] < 1024 and ratio >= 4
    print("targets (< 2 s, < 1 GB, >= 4x difflib):", "met" if ok else "NOT met")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
