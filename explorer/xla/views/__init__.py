"""Plotly figures of XLA runs and HLO diffs: pure functions of records."""

__all__: list[str] = []
