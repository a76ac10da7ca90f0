"""Interactive apps built from ``explorer.pipeline.views`` figures: the only place importing ipywidgets."""

__all__: list[str] = []
