"""Plain-text and static-HTML reports of a checked schedule (no plotly; pure python).

Every finding is marked on the line or cell where it happens, the way PyTorch's
``_format_pipeline_order`` marks ``<-- ERROR HERE``, so a listing pasted into an issue shows
the problem in place.
"""
