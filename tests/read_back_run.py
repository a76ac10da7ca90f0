"""A run as reading XLA artifacts gives it (``read_artifacts``): for the views and the explorer's
tests, built from records, no torch_xla."""

from __future__ import annotations

from explorer.xla.traces.records import Graph, Step, XlaRun


def read_back_run() -> XlaRun:
    """What ``read_artifacts`` gives: steps with verdicts and graphs, but no times and no device."""
    hashes = ["a" * 32, "b" * 32, "c" * 32]
    steps = [
        Step(
            i,
            compiled=i < 3,
            graph_hash=hashes[min(i, 2)],
            compile_ms=None,
            execute_ms=None,
            wall_ms=None,
            num_parameters=None,
            cause=f"step {i} cause",
            new_graphs=[hashes[i]] if i < 3 else [],
        )
        for i in range(6)
    ]
    graphs = [
        Graph(h, step=i, recompile=i > 0, closest=hashes[i - 1] if i else None)
        for i, h in enumerate(hashes)
    ]
    return XlaRun(
        label="read /tmp/x", device={"pjrt_device": "?", "devices": "?"}, steps=steps, graphs=graphs
    )
