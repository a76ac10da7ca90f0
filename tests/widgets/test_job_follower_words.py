"""What ``JobFollower`` says once the job is over, from a recorded run's shape (no torchrun).

When rank 2 of the seed's schedule fails, torchrun kills rank 0, which never writes an end: the
follower kept saying "(running)" and drew rank 0 as "running" after ``job.wait()`` and
``follower.stop()`` in notebook 06. The failure pinned on the grid must not write over cells.
"""

from __future__ import annotations

from types import SimpleNamespace

from explorer.analysis import build
from explorer.widgets.job_follower import JobFollower

FAILURE = {
    "rank": 2,
    "stage": 2,
    "step": 6,
    "instruction": "SendGrad(buffer_id=0)",
    "exception_type": "AssertionError",
    "message": "`assert inputs.grad is not None` failed in _exec_send_grads",
}


def _killed_neighbour_run() -> SimpleNamespace:
    ranks = [
        {"rank": 0, "state": "running", "iteration": 0, "last_step": 0},
        *({"rank": r, "state": "failed", "iteration": 0, "last_step": 6} for r in (1, 2, 3)),
    ]
    schedule = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    return SimpleNamespace(
        schedule=lambda: schedule,
        ranks=lambda: [dict(r) for r in ranks],
        follower=SimpleNamespace(records=[], events=[]),
        failure=lambda: FAILURE,
        finished=False,
        version="0.19.8",
        run_id="job",
    )


def test_after_stop_a_rank_that_wrote_no_end_is_not_said_to_be_running(tmp_path):
    follower = JobFollower(tmp_path)
    follower.run = _killed_neighbour_run()
    follower._redraw()
    assert "(running)" in follower.status.value  # while following, that is all it knows
    follower.stop()  # the job ended (job.wait() returned)
    assert "(running)" not in follower.status.value
    assert "rank 0 wrote no end" in follower.status.value
    bars = follower.progress.figure.to_dict()["data"][0]
    assert bars["text"][0].startswith("no end written") and "running" not in " ".join(bars["text"])


def test_the_pinned_failure_is_said_in_the_title_not_written_over_the_cells(tmp_path):
    follower = JobFollower(tmp_path)
    follower.run = _killed_neighbour_run()
    follower._redraw()
    grid = follower.grid.figure.to_dict()
    marker = next(t for t in grid["data"] if t.get("name") == "failure")
    assert "text" not in marker["mode"]  # its words covered the neighbouring cells
    assert (list(marker["x"]), list(marker["y"])) == ([6], [2])
    title = grid["layout"]["title"]["text"]
    # on the <sup> line after the steps: appended after </sup> it was drawn on top of that line
    assert title.endswith("</sup>") and title.count("<sup>") == 1
    assert "rank 2 FAILED at stage 2, step 6: SendGrad(buffer_id=0) (AssertionError)" in title
