"""explorer: an interactive explorer for the places where distributed training goes quietly wrong.

Layers (data flows one way; nothing lower imports anything higher):

- ``explorer.schedules`` and ``explorer.analysis`` and ``explorer.hlo``: the pure core
  (python + numpy). Importing them never imports torch, torch_xla, plotly or ipywidgets.
- ``explorer.runtime``: real executions (torch.distributed, torch_xla, torch.compile),
  heavy packages imported lazily inside functions.
- ``explorer.views``: plotly figures, pure functions of data.
- ``explorer.widgets``: the only ipywidgets importer.
- ``explorer.cli``: the same capabilities from a terminal.
"""

__version__ = "0.1.0"

__all__ = ["instrument"]


def __getattr__(name: str):
    """``explorer.instrument(engine, out_dir)``: imported on first use, so ``import explorer`` stays light."""
    if name == "instrument":
        from explorer.runtime.deepspeed.instrument import instrument

        return instrument
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
