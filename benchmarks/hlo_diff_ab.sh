#!/usr/bin/env bash
# hlo-diff --json on the committed 35,000-instruction pair, this checkout against another one
# (BASE, built with `python setup.py build_ext --inplace` and byte-compiled), alternating, 7 rounds:
# the median wall and CPU of each, from the child's own rusage (benchmarks/child_time.py).
#   bash benchmarks/hlo_diff_ab.sh /path/to/base/checkout
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$(pwd) BASE=$(realpath "$1") .venv/bin/python - <<'PY'
import os, statistics, sys
sys.path.insert(0, "benchmarks")
from child_time import timed
here, base = os.environ["HERE"], os.environ["BASE"]
pair = [os.path.abspath(f"tests/data/hlo/encoder_large_step{n}.hlo.txt.gz") for n in (1, 2)]
python = os.path.join(here, ".venv", "bin", "python")
runs = {"this": [], "base": []}
for _ in range(7):
    for name, root in (("this", here), ("base", base)):
        env = dict(os.environ, PYTHONPATH=root)
        _, wall, cpu, _ = timed([python, "-m", "explorer", "hlo-diff", "--json", *pair], env, cwd=root)
        runs[name].append((wall, cpu))
for name, xs in runs.items():
    print(f"{name}: median wall {statistics.median(w for w, _ in xs):.3f} s, "
          f"median CPU {statistics.median(c for _, c in xs):.3f} s")
PY
