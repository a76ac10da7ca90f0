"""What each teaching notebook claims once it ran top to bottom, checked on any executed copy.

A notebook's claims (the verdicts it prints, the kinds of output it shows) are asserted on an
executed notebook, whoever executed it: nbclient in a kernel of its own (the notebook tests of
each folder), or JupyterLab's *Run All* in Chromium, saved by the page (the browser tier, see
``tests/browser/test_notebooks_in_jupyterlab.py``). Executing a notebook costs one to two
minutes of this machine's time, so a run that selects both does it once: the browser tier's
run is checked, and each nbclient test that would execute the same notebook again is
deselected (``tests/browser/conftest.py``, by the rule :func:`superseded_runs`).

The two are linked by a marker, not by names: ``@pytest.mark.notebook_claims(key, by)``, with
``key`` the notebook's number ("01".."06") and ``by`` ``"nbclient"`` or ``"lab"``. Outputs are
read through the gatherers of :mod:`notebook_run` only, which read the two sources alike
(JupyterLab merges consecutive stream outputs; nbclient keeps each message).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, TypeVar

from notebook_run import PLOTLY, WIDGET, mimes, printed, stderr, texts

__all__ = [
    "BY",
    "CLAIMS",
    "MARK",
    "claims_01",
    "claims_02",
    "claims_03",
    "claims_04",
    "claims_05",
    "claims_06",
    "scheduling_unit",
    "superseded_runs",
]

#: The marker that links a test to the notebook whose claims it checks, and who executes it.
MARK = "notebook_claims"
#: Who executes the notebook for a test so marked.
BY = ("nbclient", "lab")


def _titles(nb: Any, containing: str = "") -> list[str]:
    return [
        json.dumps(o["data"][PLOTLY]["layout"].get("title", {}))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if PLOTLY in o.get("data", {}) and containing in json.dumps(o["data"][PLOTLY]["layout"])
    ]


def claims_01(nb: Any) -> None:
    """01 ends with the live explorer, after plain figures (GPipe's bubble named in a title)."""
    kinds = mimes(nb)
    assert sum(PLOTLY in m for m in kinds) >= 6  # grid, timelines, comparisons as plain figures
    assert WIDGET in kinds[-1] and "text/html" in kinds[-1]  # the live app, static fallback
    assert any("bubble 27.3% of total time" in t for t in _titles(nb))  # GPipe: 3/11


def claims_02(nb: Any) -> None:
    """02 tells the seed's story: the failure, the fix in the listing, every size, the search."""
    text = printed(nb)
    assert "stage 2 step 6: SendGrad(buffer_id=0) must send micro-batch 0's input gradient" in text
    # The fix, in the listing: the gradient leaves before the next activation arrives.
    assert (
        "[2, SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]" in text
    )
    # legacy and fixed, listed and summarised
    assert text.count("verdict: valid") == 4 and "INVALID" not in text
    lifetimes = _titles(nb, containing="Buffer lifetimes")
    assert (
        len(lifetimes) == 2
        and "2 allocated, 3 needed" in lifetimes[0]
        and "2 allocated, 2 needed" in lifetimes[1]
    )
    # Every size: the smallest failing case, today's schedule proved, and the fix found and proved.
    assert "smallest failing size: 3 stages x 3 micro-batches" in text
    assert (
        "no hazard, mismatch, deadlock or wrong gradient count at any of 1,984 sizes in 2-32:1-64"
        in text
    )
    assert "candidate 1: grads-first" in text and "defer-recv: fails at 2x2: deadlock" in text
    assert WIDGET in mimes(nb)[-1]


def claims_03(nb: Any) -> None:
    """03 runs the pipeline bitwise equal to the reference and says the seed's failure in words."""
    text = printed(nb)
    assert text.count("bitwise_equal_to_reference=True") == 3
    assert "bitwise identical to each other: True" in text
    # The failure in sentences (Failure.describe), never the raw record.
    assert "measured:  rank 2, stage 2, step 6, SendGrad(buffer_id=0): " in text
    assert "'instruction':" not in text
    assert "stage 2 step 6: SendGrad(buffer_id=0)" in text  # the analysis said the same beforehand
    # PyTorch's engine agrees
    assert "losses and gradients bitwise equal between engines: True" in text
    kinds = mimes(nb)
    assert any(PLOTLY in m for m in kinds) and any(WIDGET in m for m in kinds)


def claims_04(nb: Any) -> None:
    """04 explains each XLA recompile, reads its folder back, and says what it expected."""
    text = texts(nb)
    assert "pin_layout_in_collective_ops=False" in text
    assert "new graph: no, because graph" in text
    assert "instruction(s) added" in text and "parameter count changed" in text
    kinds = set().union(*mimes(nb))
    assert PLOTLY in kinds and WIDGET in kinds
    assert stderr(nb) == [], "a teaching notebook prints no warnings"
    assert "model ready on" in text and "step 3: " in text, "cells that run steps print progress"
    assert "same verdicts as the run: True" in text, "the folder reads back with the run's verdicts"
    assert (
        "\n3 new graph: yes" in text and "\n4 new graph: no" in text and "\n5 new graph: no" in text
    ), "deferred callbacks: four graphs where two were expected, then cache hits"
    timeline = next(
        o.data[PLOTLY]
        for c in nb.cells
        if "step_timeline(" in c.source
        for o in c.outputs
        if PLOTLY in o.get("data", {})
    )
    title = timeline["layout"]["title"]["text"]
    said = next(
        c.source for c in nb.cells if c.cell_type == "markdown" and "as expected" in c.source
    )
    assert "**2 graphs, as expected**" in said and ": steps 0, 1 compiled 2 graphs" in title, title


def claims_05(nb: Any) -> None:
    """05 finds the period-three recompile cycle, live and from a trace folder, without warnings."""
    text = texts(nb)
    assert "Cycling among 3 cached variants every 3 iterations" in text
    assert "True recompiles every 3 iterations" in text and "Eager fallback" in text
    assert "guards that failed before 0/3" in text and "size mismatch" in text, (
        "the trace folder section ran"
    )
    kinds = set().union(*mimes(nb))
    assert PLOTLY in kinds and WIDGET in kinds
    assert stderr(nb) == [], f"a teaching notebook prints no warnings: {stderr(nb)}"


def claims_06(nb: Any) -> None:
    """06 tells the seed's story on DeepSpeed's engine, no rank is left listed as running, and a
    hung job is said stalled and diagnosed."""
    text = printed(nb)
    assert text.count("bitwise_equal_to_reference=True") == 2
    assert "losses bitwise identical to each other: True" in text
    assert "predicted: stage 2 step 6: SendGrad(buffer_id=0)" in text
    assert "DeepSpeed: rank 2, stage 2, step 6, SendGrad(buffer_id=0): AssertionError" in text
    assert "first failure: AssertionError" in text and "stage 2 step 6" in text
    assert "first failure: rank 2, stage 2, step 6" in text  # explorer read, from a terminal
    # after job.wait(), no rank is listed as running: torchrun killed those that wrote no end
    listed = re.findall(r"rank \d \(stage \d\): (\w+)", text)
    assert len(listed) == 4 and set(listed) <= {"failed", "stopped"}, listed
    kinds = mimes(nb)
    assert any(PLOTLY in m for m in kinds) and any(WIDGET in m for m in kinds)
    # the int64 tensor in a 3-stage tuple (3 iterations, 8 gradients each): the job says nothing,
    # the contract says where
    assert "job exit code: 0 - 24 message(s) broke the P2P contract" in text
    assert (
        "first: reuse at stage 1 step 4: stage 2 -> 1, micro-batch 0, tuple[0]: sent float32[4,32]; "
        "the receive buffer is int64[4,32], reused from the activation received at step 1" in text
    )
    # the job that stops moving: said stalled, diagnosed by the doctor, the verdict on the grid
    said = next(line for line in text.splitlines() if "; diagnosis:" in line)
    assert said.startswith("stalled for ") and (
        "diagnosis: rank 0 waits on rank 1: stage 1 (rank 1) sleeps at " in said
    ), said
    assert "deepspeed_user_job.py:" in said and "ForwardPass" in said, said
    assert any("HUNG: rank 0 waits on rank 1" in t for t in _titles(nb))
    assert "job ended: True" in text


#: Each notebook's claims, by its number.
CLAIMS: dict[str, Callable[[Any], None]] = {
    "01": claims_01,
    "02": claims_02,
    "03": claims_03,
    "04": claims_04,
    "05": claims_05,
    "06": claims_06,
}

T = TypeVar("T")

#: The browser tier's module, whose tests of one notebook share one Run All (a module fixture).
LAB_MODULE = "browser/test_notebooks_in_jupyterlab.py"

#: Modules whose tests share a module fixture that starts real jobs or builds for tens of
#: seconds (the lessons, torchrun jobs with the profiler, Flight Recorder dumps, run folders, an
#: XLA run, compiled scenarios). Under ``--dist load`` both workers ran their share of the tests
#: and so each built the fixture: the same jobs twice, about three minutes of CPU per suite.
ONE_WORKER_MODULES = (
    "browser/test_lessons_in_chromium.py",
    "read/test_profiler_traces.py",
    "read/test_read_xla.py",
    "pipeline/test_doctor_collectives.py",
    "pipeline/test_check_run_folder.py",
    "pipeline/test_torch_messages.py",
    "pipeline/test_scale_job.py",
    "compile/test_trace_read.py",
    "compile/test_compile_scenarios.py",
)


def scheduling_unit(nodeid: str) -> str:
    """What pytest-xdist sends to one worker together: a notebook's browser tests, a module
    of :data:`ONE_WORKER_MODULES`, or one test.

    The browser tests of a notebook (ids ending in ``[NN]``) share a module fixture that does
    its Run All; a worker that runs any one of them sets it up, so under ``--dist load`` (which
    deals tests round-robin) 01-04 were each run in the lab by both workers. Every other test
    is a unit of its own, as ``--dist load`` schedules it.
    """
    path, _, rest = nodeid.partition("::")
    if path.endswith(ONE_WORKER_MODULES):
        return path
    found = re.search(r"\[(\d\d)\]$", rest)
    if path.endswith(LAB_MODULE) and found:
        return f"{path}::[{found.group(1)}]"
    return nodeid


def superseded_runs(selected: Iterable[tuple[T, str, str]], lab_can_run: bool) -> list[T]:
    """The nbclient executions to leave out: those of a notebook the lab's run checks as well.

    ``selected``: ``(test, key, by)`` for each selected test marked ``notebook_claims(key,
    by)``. A notebook whose claims a ``"lab"`` test checks in this run is executed there
    already; executing it again with nbclient costs minutes and asserts nothing more. Only
    where the lab can run (Chromium and Playwright installed): else the browser tests are
    skipped or fail, and the nbclient tests are what checks the claims.
    """
    selected = list(selected)
    for _, key, by in selected:
        if by not in BY or key not in CLAIMS:
            raise ValueError(
                f"notebook_claims({key!r}, {by!r}): key one of {list(CLAIMS)}, by one of {BY}"
            )
    if not lab_can_run:
        return []
    in_lab = {key for _, key, by in selected if by == "lab"}
    return [test for test, key, by in selected if by == "nbclient" and key in in_lab]
