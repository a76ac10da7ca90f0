"""Schedules as data: typed instructions, the columnar ``Schedule``, generators, adapters, io.

Pure python + numpy: importing this package never imports torch, plotly or ipywidgets.
"""

from explorer.pipeline.schedules.generators import KINDS, generate
from explorer.pipeline.schedules.instructions import Instruction, Kind, parse_instruction
from explorer.pipeline.schedules.schedule import Schedule, from_columns, from_streams

__all__ = [
    "KINDS",
    "Instruction",
    "Kind",
    "Schedule",
    "from_columns",
    "from_streams",
    "generate",
    "parse_instruction",
]
