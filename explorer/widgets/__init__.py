"""Interactive apps built from ``explorer.views`` figures: the only place importing ipywidgets."""

__all__: list[str] = []
