"""Kernel-side re-render of the schedule explorer, and figure sizes for large schedules.

What a slider costs in the kernel: rebuild the schedule, check it, build the four figures and
copy them into their FigureWidgets (the browser's drawing is not included: it runs in another
process and the browser test covers it). Goal from issue 4: under 100 ms at 8 stages x 32
micro-batches. Then the same for 64 x 512 (no goal: it must stay usable, i.e. the payload must
stay a few MB of typed arrays in a handful of traces, not one shape per cell).

    .venv/bin/python benchmarks/bench_widgets.py [--repeat 15]

Exits 1 when the 8x32 median misses 100 ms.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.measured import measured_vs_simulated
from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
from explorer.pipeline.views.grid import grid_figure
from explorer.pipeline.views.lifetimes import lifetimes_figure
from explorer.pipeline.views.overlay import overlay_figure
from explorer.pipeline.views.timeline import timeline_figure

GOAL_S = 0.100


def slider_rerender(kind: str, stages: int, microbatches: int, repeat: int, **kw) -> list[float]:
    """Seconds per re-render, moving the stages slider back and forth by one."""
    app = ScheduleExplorer(
        kind, stages, microbatches, max_microbatches=max(512, microbatches), **kw
    )
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        app.controls.stages.value = stages - 1 if i % 2 == 0 else stages
        times.append(time.perf_counter() - t0)
    return times


def breakdown(kind: str, stages: int, microbatches: int, **kw) -> dict[str, float]:
    """One pass of each stage of the work, for the table."""
    out = {}
    t = time.perf_counter()
    report = check(build(kind, stages, microbatches, **kw))
    out["build + check"] = time.perf_counter() - t
    for name, fn in (
        ("grid", grid_figure),
        ("timeline", timeline_figure),
        ("lifetimes", lifetimes_figure),
        ("overlay", lambda r: overlay_figure(measured_vs_simulated(r))),
    ):
        t = time.perf_counter()
        fig = fn(report)
        out[f"{name} figure"] = time.perf_counter() - t
        out[f"{name} JSON MB"] = len(fig.to_json()) / 1e6
        out[f"{name} traces"] = len(fig.data)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(f"# {platform.machine()}, {platform.python_version()}, {platform.system()}")
    small = slider_rerender("1f1b", 8, 32, args.repeat)
    ds = slider_rerender("deepspeed-train", 8, 32, args.repeat, buffers="fixed", order="legacy")
    med, med_ds = statistics.median(small), statistics.median(ds)
    print(
        f"8x32 1f1b re-render: median {med * 1e3:.1f} ms, min {min(small) * 1e3:.1f} ms, max {max(small) * 1e3:.1f} ms"
    )
    print(f"8x32 deepspeed-train (hazards) re-render: median {med_ds * 1e3:.1f} ms")
    big = slider_rerender("deepspeed-train", 64, 512, 3, buffers="fixed", order="legacy")
    big_clean = slider_rerender("1f1b", 64, 512, 3)
    print(
        f"64x512 deepspeed-train (29,729 hazards) re-render: median {statistics.median(big):.2f} s"
    )
    print(f"64x512 1f1b re-render: median {statistics.median(big_clean):.2f} s")
    for label, kw in (
        ("1f1b", {}),
        ("deepspeed-train fixed/legacy", {"buffers": "fixed", "order": "legacy"}),
    ):
        kind = label.split()[0]
        parts = breakdown(kind, 64, 512, **kw)
        print(f"64x512 {label}: " + ", ".join(f"{k} {v:.3g}" for k, v in parts.items()))
    ok = med < GOAL_S and med_ds < GOAL_S
    print(f"goal < {GOAL_S * 1e3:.0f} ms at 8x32: {'met' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
