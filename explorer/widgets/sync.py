"""Update a live ``go.FigureWidget`` to match a freshly built ``go.Figure``.

Views build plain figures (pure, testable); the widget keeps one ``FigureWidget`` per view
on the page and copies each new figure into it. When the trace structure is unchanged (the
common case: a slider moved) every trace and the layout are updated in place inside one
``batch_update()``, so the browser receives a single restyle/relayout message instead of a
teardown and rebuild. When it changed (e.g. bars switched to WebGL) the traces are replaced.
"""

from __future__ import annotations

import plotly.graph_objects as go

_SKIP = ("type", "uid")


def sync_figure(target: go.FigureWidget, source: go.Figure) -> None:
    """Make ``target`` show ``source`` (the template is kept: every view uses the default)."""
    layout = source.layout.to_plotly_json()
    layout.pop("template", None)
    for key in target.layout.to_plotly_json():
        if key not in layout and key != "template":
            layout[key] = None  # drop what the new figure no longer has (e.g. a note)
    same = len(target.data) == len(source.data) and all(type(a) is type(b) for a, b in zip(target.data, source.data))
    if same:
        with target.batch_update():
            for old, new in zip(target.data, source.data):
                props = new.to_plotly_json()
                for key in _SKIP:
                    props.pop(key, None)
                for key in old.to_plotly_json():
                    if key not in props and key not in _SKIP:
                        props[key] = None
                old.update(props, overwrite=True)
            target.layout.update(layout, overwrite=True)
        return
    with target.batch_update():
        target.data = ()
        target.add_traces(list(source.data))
        target.layout.update(layout, overwrite=True)
