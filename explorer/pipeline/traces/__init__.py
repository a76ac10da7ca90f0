"""Measured instruction timings: one generic record format, and readers that produce it.

The real pipeline (its own issue) and PyTorch's profiler both yield a :class:`MeasuredTrace`;
the measured-overlay view consumes only that. Pure python + numpy.
"""

from explorer.pipeline.traces.chrome import read_chrome_trace
from explorer.pipeline.traces.records import MeasuredTrace

__all__ = ["MeasuredTrace", "read_chrome_trace"]
