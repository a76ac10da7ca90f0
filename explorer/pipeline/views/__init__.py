"""Plotly views: pure functions that take data and return a ``go.Figure``.

No function here calls ``.show()``; tests assert on ``fig.to_dict()``, widgets wrap the figures
in ``go.FigureWidget`` and the static pages embed them with :func:`explorer.ui.html.page`.
"""

__all__: list[str] = []
