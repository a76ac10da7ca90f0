"""Interactive apps built from ``explorer.views`` figures: the only place importing ipywidgets."""
