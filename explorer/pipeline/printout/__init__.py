"""Printouts of a checked schedule: plain-text listings and a static HTML page (no plotly).

Named apart from :class:`explorer.pipeline.analysis.Report` (the record of what the analyses found):
this package only prints that record.

Every finding is marked on the line or cell where it happens, the way PyTorch's
``_format_pipeline_order`` marks ``<-- ERROR HERE``, so a listing pasted into an issue shows
the problem in place.
"""

__all__: list[str] = []
