"""The XLA product: PyTorch/XLA graphs that vary between steps, and the HLO that says why.

The names a notebook or a user script needs, each loaded on first use (``import explorer.xla``
imports neither torch nor torch_xla)::

    from explorer.xla import run_scenario, graphs_table, XlaExplorer
"""

from explorer.lazy import exports

_TABLE = {
    "run_scenario": "explorer.xla.runtime",
    "read_artifacts": "explorer.xla.analysis.from_artifacts",
    "diff_modules": "explorer.xla.hlo",
    "read_modules": "explorer.xla.hlo",
    "step_timeline": "explorer.xla.views.runs",
    "graphs_table": "explorer.xla.views.runs",
    "print_progress": "explorer.xla.app",
    "XlaExplorer": "explorer.xla.app",
}
__getattr__, __dir__ = exports(__name__, _TABLE)
__all__ = sorted(_TABLE)
