"""Records of what a pipeline ran, and the readers that produce them. Pure python + numpy.

A run of the explorer's engine, PyTorch's or DeepSpeed's (:mod:`.result`, :mod:`.follow`,
:mod:`.instrumented`), a Chrome trace (:mod:`.chrome`) and per-rank profiler traces
(:mod:`.profiler`) all yield a :class:`MeasuredTrace`, the measured-overlay view's input.
Readers only read: what a measurement means is :mod:`explorer.pipeline.analysis`'s.
"""

from explorer.pipeline.traces.chrome import read_chrome_trace
from explorer.pipeline.traces.records import MeasuredTrace

__all__ = ["MeasuredTrace", "read_chrome_trace"]
