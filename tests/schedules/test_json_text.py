"""The fast indented JSON writer spells every document exactly as ``json.dumps(indent=N)``."""

from __future__ import annotations

import enum
import json

import numpy as np
import pytest

from explorer.json_text import dumps_indented
from explorer.pipeline.analysis import build, check


class Colour(enum.IntEnum):
    RED = 3


ODD = [
    {"a": [1, 2.5, float("nan"), float("inf"), -float("inf"), True, None, "x,y", [], {}]},
    {"b": (1, 2), "é": 'ü\n"', "c": [1e300, -0.0, 10**30, 1e-7]},
    {1: 2, "k": None},  # a non-string key: json's own spelling
    [[]],
    {},
    [],
    "s",
    3,
    1.5,
    None,
    [Colour.RED, np.float64(0.1).item()],
    {"ints": [Colour.RED, 2]},  # an int subclass inside a list of numbers
    {"names": ["a.1", "é\n", 'q"', "\\", ""], "lines": ("x", "y")},  # lists of strings
    ["s", 1],  # strings and numbers together
]


@pytest.mark.parametrize("doc", ODD)
@pytest.mark.parametrize("indent", [1, 3])
def test_odd_documents_match_the_standard_library(doc: object, indent: int) -> None:
    assert dumps_indented(doc, indent) == json.dumps(doc, indent=indent)


def test_a_check_report_matches_byte_for_byte() -> None:
    from explorer.pipeline.analysis.memory import memory_over_time

    report = check(build("zb-h1", 4, 8))
    doc = report.to_dict()
    doc["memory"] = [m.to_dict() for m in memory_over_time(report.schedule, report.timeline)]
    assert dumps_indented(doc) == json.dumps(doc, indent=1)


def test_an_object_only_default_could_encode_still_raises() -> None:
    with pytest.raises(TypeError):
        dumps_indented({"x": object()})
