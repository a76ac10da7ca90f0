"""The torch.compile product: why a compiled model recompiles, and with what period.

The names a notebook or a user script needs, each loaded on first use (``import
explorer.compile`` imports no torch)::

    from explorer.compile import run_scenario, iteration_figure, CompileExplorer
"""

from explorer.lazy import exports

_TABLE = {
    "run_scenario": "explorer.compile.runtime",
    "run_step": "explorer.compile.runtime",
    "default_backend": "explorer.compile.runtime",
    "record_example_job": ("explorer.compile.runtime.example_job", "record"),
    "read_job": "explorer.compile.analysis.from_trace",
    "diagnose": "explorer.compile.analysis.diagnosis",
    "probe_report": "explorer.compile.printout",
    "trace_report": "explorer.compile.printout",
    "iteration_figure": "explorer.compile.views",
    "compile_table": "explorer.compile.views",
    "guards_table": "explorer.compile.views",
    "probe_scenario": "explorer.compile.app",
    "CompileExplorer": "explorer.compile.app",
}
__getattr__, __dir__ = exports(__name__, _TABLE)
__all__ = sorted(_TABLE)
