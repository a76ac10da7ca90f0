"""explorer: an interactive explorer for the places where distributed training goes quietly wrong.

Three products over one thin base (the layout ``tests/test_layering.py`` checks):

- ``explorer.pipeline``: pipeline schedules, their hazards, mismatches and deadlocks, and real runs;
- ``explorer.xla``: PyTorch/XLA graphs that vary between steps, and the HLO that says why;
- ``explorer.compile``: why ``torch.compile`` recompiles, and with what period.

Each has the same floors (records, analysis, runtime, views, app, cli; nothing below runtime
imports torch, plotly or ipywidgets). Under them, the ground every product shares (errors,
inputs, loading, failure, processes, ui, cli_options); over them, the door (``explorer read``
and the CLI). ``import explorer`` stays light: ``explorer.instrument`` loads on first use.
"""

__version__ = "0.1.0"

__all__ = ["instrument"]


def __getattr__(name: str):
    """``explorer.instrument(engine, out_dir)``: imported on first use, so ``import explorer`` stays light."""
    if name == "instrument":
        from explorer.pipeline.runtime.deepspeed.instrument import instrument

        return instrument
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
