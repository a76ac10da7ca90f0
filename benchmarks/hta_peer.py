"""The peer of ``bench_scale_traces``: HolisticTraceAnalysis on the same job's profiler traces.

    python benchmarks/hta_peer.py JOB_DIR     (HolisticTraceAnalysis importable: see the benchmark)

HTA loads every rank's trace into a pandas frame (in a pool of every core) and its analyses then
work on those frames. Its analyses of time (temporal breakdown, idle time, overlap) read GPU
kernels: on a CPU job they have nothing to read, and no analysis of HTA names a slow rank
among replicas. So the peer is what an HTA user writes to ask the same question: load the
traces with HTA, take every ``PP:<action>`` span from its frames, and compare each rank's
median duration per action with the median of the ranks running the same action (pandas, as in
HTA's own notebooks). Prints one JSON line: load and analysis seconds, ranks, the ranks whose
median is over 1.25x their action's median.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    job = Path(argv[0])
    files = {
        int(m.group(1)): str(p)
        for p in job.iterdir()
        if (m := re.fullmatch(r"torch_rank(\d+)\.json", p.name))
    }
    import pandas as pd
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_files=files, trace_dir=str(job))
    loaded = time.perf_counter() - t0
    t1 = time.perf_counter()
    symbols = analysis.t.symbol_table.get_sym_table()
    pp = {i for i, s in enumerate(symbols) if s.startswith("PP:")}
    frames = []
    for rank, df in analysis.t.get_all_traces().items():
        spans = df[df["name"].isin(pp)][["name", "dur"]].copy()
        spans["rank"] = rank
        frames.append(spans)
    spans = pd.concat(frames)
    per_rank = spans.groupby(["name", "rank"])["dur"].median().rename("rank_median").reset_index()
    per_rank["action_median"] = per_rank.groupby("name")["rank_median"].transform("median")
    slow = per_rank[per_rank["rank_median"] > 1.25 * per_rank["action_median"]]
    analysed = time.perf_counter() - t1
    print(
        json.dumps(
            {
                "load_s": loaded,
                "analyse_s": analysed,
                "ranks": len(files),
                "spans": len(spans),
                "slow_ranks": sorted({int(r) for r in slow["rank"]}),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
