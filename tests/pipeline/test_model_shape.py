"""The launcher's check of a built-in model, made without torch, says what building it says.

``explorer run`` used to build a built-in model in the launcher to check it, importing torch
(about 2 s of CPU before the first rank started). It now counts the model's layers from its
options and splits the count; each case here is also built for real by ``build_model``, and
the two must agree: the same layer count, and the same refusal, word for word.
"""

from __future__ import annotations

import pytest

from explorer.errors import InputError
from explorer.pipeline.runtime.model_shape import builtin_layers, split
from explorer.pipeline.runtime.models import build_model
from explorer.pipeline.runtime.spec import ModelSpec

CASES = [
    ("mlp", {}, 2, None),
    ("mlp", {}, 8, None),
    ("mlp", {}, 9, None),  # more stages than layers
    ("mlp", {"layers": 3, "width": 5}, 3, None),
    ("mlp", {"layers": 3}, 4, None),
    ("mlp", {}, 3, (2, 5)),
    ("mlp", {}, 3, (5, 2)),  # cut points out of order
    ("mlp", {}, 2, (8,)),  # a cut past the last layer
    ("transformer", {}, 4, None),
    ("transformer", {}, 8, None),
    ("transformer", {}, 9, None),
    ("transformer", {"blocks": 1, "dim": 8, "heads": 4}, 3, None),
    ("transformer", {"seqs": [3, 5]}, 2, None),
    ("transformer", {}, 2, (1,)),
]


def _built(name: str, options: dict, stages: int, cuts) -> str:
    """What building the model for real says: its layer count per stage, or its refusal."""
    try:
        model = build_model(ModelSpec(name, options, cuts), stages, 2, 0)
    except InputError as exc:
        return f"refused: {exc}"
    return str([len(stage) for stage in model.stages])


def _counted(name: str, options: dict, stages: int, cuts) -> str:
    layers = builtin_layers(name, options)
    assert layers is not None, f"{name} {options} could not be counted"
    try:
        parts = split(range(layers), stages, cuts)
    except InputError as exc:
        return f"refused: {exc}"
    return str([len(part) for part in parts])


@pytest.mark.parametrize("name, options, stages, cuts", CASES)
def test_counting_a_builtin_models_layers_says_what_building_it_says(name, options, stages, cuts):
    assert _counted(name, options, stages, cuts) == _built(name, options, stages, cuts)


@pytest.mark.parametrize(
    "name, options",
    [
        ("mlp", {"depth": 3}),  # an option the function does not take
        ("mlp", {"width": "wide"}),
        ("mlp", {"width": 0}),
        ("mlp", {"layers": True}),
        ("mlp", {"width": 100_000}),  # too large to vouch for without building it
        ("transformer", {"dim": 10, "heads": 3}),  # attention cannot split 10 across 3 heads
        ("transformer", {"seqs": 4}),
        ("transformer", {"seqs": [4, -1]}),
        ("my_models:build", {}),
    ],
)
def test_options_only_a_build_can_judge_are_left_to_the_build(name, options):
    assert builtin_layers(name, options) is None
