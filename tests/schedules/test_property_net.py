"""The property net: no correct schedule is ever called wrong, no known-wrong one called right,
and the sweep and the single check give one verdict.

Every built-in schedule kind with every option combination meant to be correct, PyTorch's own
schedule classes through the adapter, and the CSV round trip of each are proved clean over at
least 2-12 stages x 1-32 micro-batches (:mod:`net`) under every P2P model that applies; each
schedule known to be wrong still fails at its known smallest size. An invariant added to
:func:`explorer.pipeline.analysis.check` meets all of them here before it lands: the gradient invariant
once called DeepSpeed's forward-only schedule wrong at every size, and nothing had asked it.
"""

from __future__ import annotations

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis import check
from explorer.pipeline.analysis.sizes import Asking, check_size, check_sizes, parse_sizes

from .net import CORRECT, RANGE, WRONG, Correct, Wrong

pytestmark = pytest.mark.slow  # about a minute of checks in all, spread over the workers


@pytest.mark.parametrize(
    ("entry", "model"),
    [(c, m) for c in CORRECT for m in c.models],
    ids=lambda v: v.name if isinstance(v, Correct) else v,
)
def test_every_correct_schedule_is_clean_at_every_size(entry: Correct, model: str) -> None:
    stages, mbs = parse_sizes(entry.sizes)
    sweep = check_sizes(entry.make, stages, mbs, asking=Asking(model, "lazy"))  # type: ignore[arg-type]
    worst = sweep.smallest_failing
    assert worst is None, (
        f"{entry.name} under {model} P2P is called wrong at {worst.stages}x{worst.microbatches}: "
        f"{worst.first_words}"
    )
    assert sweep.checked, f"{entry.name}: no size of {entry.sizes} applies"


@pytest.mark.parametrize("entry", WRONG, ids=lambda w: w.name)
def test_every_known_wrong_schedule_fails_at_its_smallest_size(entry: Wrong) -> None:
    stages, mbs = parse_sizes(RANGE)
    sweep = check_sizes(entry.make, stages, mbs, asking=Asking(entry.model))  # type: ignore[arg-type]
    worst = sweep.smallest_failing
    assert worst is not None, f"{entry.name} is called clean at every size of {RANGE}"
    assert (worst.stages, worst.microbatches) == entry.smallest
    assert getattr(worst, entry.finding) > 0 and entry.words in worst.first_words


def _one_verdict(make, p: int, m: int, model: str, communicators: str) -> None:
    """The sweep's cell at (p, m) is the single check at (p, m), finding kind by finding kind."""
    cell = check_size(make, p, m, Asking(model, communicators))  # type: ignore[arg-type]
    try:
        schedule = make(p, m)
    except InputError as exc:
        assert cell.skipped == str(exc)
        return
    report = check(schedule, model=model, communicators=communicators)  # type: ignore[arg-type]
    f = report.findings
    assert cell.ok == report.ok
    assert (cell.hazards, cell.mismatches, cell.unmatched, cell.gradients) == (
        len(f.hazards),
        len(f.mismatched),
        len(f.unmatched),
        len(f.gradients),
    )
    assert cell.deadlocks == int(f.deadlock is not None) + int(f.communicators is not None)
    assert cell.first == (None if report.ok else f.all()[0].to_dict())
    # check --json lists each kind in the order the findings happen, as the text and the cell
    # name the first: hazards[0] once came in stage order, another "first" than theirs
    assert list(f.hazards) == [x for x in f.all() if any(x is h for h in f.hazards)]
    assert cell.bubble == (report.timeline.bubble.of_total if report.timeline else None)


@pytest.mark.parametrize("model", ["blocking", "batched"])
@pytest.mark.parametrize("communicators", ["eager", "lazy"])
@pytest.mark.parametrize(
    "entry",
    CORRECT + WRONG,  # type: ignore[operator]
    ids=lambda e: e.name,
)
def test_a_sweep_cell_is_the_single_check(entry, model: str, communicators: str) -> None:
    for p in (2, 3, 5):
        for m in (1, 3, 4, 6):
            _one_verdict(entry.make, p, m, model, communicators)
