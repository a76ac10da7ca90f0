"""How a model splits into stages, and how many layers a built-in model has, without torch.

The launcher checks a run's model before it starts N ranks, so a model that cannot be split
is one message instead of N dead ranks. Building a built-in model to check it imported torch
into the launcher: about 2 s of CPU before the first rank started, on every ``explorer run``.
What can go wrong with a built-in model is known from its options alone (a layer count below
the stage count, cut points out of range, options of the wrong kind), so those are checked
here; options this module cannot vouch for (unknown names, sizes too large to trust without
building) are left to the real build, as before.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, TypeVar

from explorer.errors import InputError

T = TypeVar("T")

#: The options of each built-in model and their defaults (``models.mlp``, ``models.transformer``).
_DEFAULTS: dict[str, dict[str, int]] = {
    "mlp": {"width": 32, "layers": 8, "microbatch_size": 4},
    "transformer": {
        "dim": 32,
        "blocks": 6,
        "heads": 2,
        "vocab": 64,
        "seq": 8,
        "microbatch_size": 4,
    },
}
#: Parameters above which a built-in model is built to be checked (memory is the question then).
_TRUSTED_PARAMETERS = 50_000_000


def split(
    layers: Sequence[T], num_stages: int, cuts: Optional[Sequence[int]] = None
) -> list[list[T]]:
    """Layers per stage: at ``cuts`` (where stages 1.. begin) or as evenly as the count allows."""
    n = len(layers)
    if cuts is None:
        if n < num_stages:
            raise InputError(
                f"the model has {n} layers for {num_stages} stages: every stage needs at least one "
                f"layer; use at most {n} stages or a deeper model"
            )
        cuts = [round(s * n / num_stages) for s in range(1, num_stages)]
    cuts = list(cuts)
    if (
        len(cuts) != num_stages - 1
        or cuts != sorted(set(cuts))
        or (cuts and not 0 < cuts[0] <= cuts[-1] < n)
    ):
        raise InputError(
            f"cut points {cuts} must be {num_stages - 1} increasing layer indices between 1 and {n - 1} "
            f"(where stages 1..{num_stages - 1} begin)"
        )
    bounds = [0, *cuts, n]
    return [list(layers[a:b]) for a, b in zip(bounds, bounds[1:])]


def builtin_layers(name: str, options: Mapping[str, Any]) -> Optional[int]:
    """The number of layers built-in model ``name`` has with ``options``, when the options alone
    prove it builds (known names, positive whole numbers, a model small enough to build);
    None when only building it can tell."""
    defaults = _DEFAULTS.get(name)
    if defaults is None:
        return None
    given = dict(options)
    seqs = given.pop("seqs", ()) if name == "transformer" else ()
    if not isinstance(seqs, (list, tuple)):
        return None
    if set(given) - set(defaults) or not _counts(list(given.values()) + list(seqs)):
        return None
    o = {**defaults, **given}
    if name == "mlp":
        parameters = o["layers"] * (o["width"] + 1) * o["width"]
        layers = o["layers"]
    else:
        if o["dim"] % o["heads"]:  # attention splits the width across its heads
            return None
        parameters = o["blocks"] * 13 * o["dim"] ** 2 + 2 * o["vocab"] * o["dim"]
        layers = o["blocks"] + 2  # the embedding, the blocks, the head
    return layers if parameters <= _TRUSTED_PARAMETERS else None


def _counts(values: list[Any]) -> bool:
    """Whether every value is a positive whole number a model function can take as a size."""
    return all(type(v) is int and 0 < v <= 1 << 20 for v in values)


__all__ = ["builtin_layers", "split"]
