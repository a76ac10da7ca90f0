"""What ``JobFollower`` says once the job is over, from a recorded run's shape (no torchrun).

When rank 2 of the seed's schedule fails, torchrun kills rank 0, which never writes an end: the
follower kept saying "(running)" and drew rank 0 as "running" for the 50 s after the teardown in
notebook 06. Once another rank failed, a silent rank is stopped. The failure pinned on the grid must not write over cells.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from explorer.pipeline.analysis import build
from explorer.pipeline.app.job_follower import JobFollower
from explorer.pipeline.traces.follow import Follower, RankProgress

FAILURE = {
    "rank": 2,
    "stage": 2,
    "step": 6,
    "instruction": "SendGrad(buffer_id=0)",
    "exception_type": "AssertionError",
    "message": "`assert inputs.grad is not None` failed in _exec_send_grads",
}


def _killed_neighbour_run() -> SimpleNamespace:
    """Ranks 1-3 wrote a failure at step 6; rank 0 was killed at step 0 and wrote nothing more.

    The ranks' states come from a real :class:`Follower` (the one definition every view uses).
    """
    follower = Follower(Path("unused"))
    follower.ranks = {
        0: RankProgress(0, last_step=0, iteration=0, state="running"),
        **{r: RankProgress(r, last_step=6, iteration=0, state="failed") for r in (1, 2, 3)},
    }
    schedule = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    return SimpleNamespace(
        schedule=lambda: schedule,
        ranks=lambda: [
            {"rank": p.rank, "state": p.state, "iteration": p.iteration, "last_step": p.last_step}
            for p in follower.progress()
        ],
        follower=SimpleNamespace(records=[], events=[], job_ended=False, trace=follower.trace),
        failure=lambda: FAILURE,
        finished=False,
        version="0.19.8",
        run_id="job",
    )


def test_a_rank_that_wrote_no_end_after_its_neighbours_failed_is_not_said_to_be_running(
    tmp_path,
):
    follower = JobFollower(tmp_path)
    follower.run = _killed_neighbour_run()
    follower._redraw()
    # while following, before the launcher has ended: the failures alone say it
    status = follower.status.value
    assert "running" not in status
    assert "(failed: ranks 1, 2, 3 failed; rank 0 stopped (no end written" in status
    bars = follower.progress.figure.to_dict()["data"][0]
    assert [t.split(" · ")[0] for t in bars["text"]] == ["stopped", "failed", "failed", "failed"]
    assert follower.history[-1]["states"] == {0: "stopped", 1: "failed", 2: "failed", 3: "failed"}
    follower.stop()  # the job ended (job.wait() returned): the same words
    assert follower.status.value == status


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


class _Launcher:
    """Stands for the torchrun process: ``poll()`` is None until :meth:`end`."""

    def __init__(self) -> None:
        self.returncode = None

    def poll(self):
        return self.returncode

    def end(self, code: int) -> None:
        self.returncode = code


def test_the_follower_thread_says_stopped_and_ends_once_the_launcher_ended(tmp_path):
    """Two ranks started and then wrote nothing (killed with the launcher): the thread reads the
    folder, says running while the launcher runs, then stopped, and ends by itself."""
    import json

    for rank in (0, 1):
        line = {"type": "start", "rank": rank, "run": "job", "pid": 1, "stages": [rank]}
        line.update(source="deepspeed", num_stages=2, unix=1.0, deepspeed_version="0.19.8")
        (tmp_path / f"rank{rank}.jsonl").write_text(json.dumps(line) + "\n")
    launcher = _Launcher()
    follower = JobFollower(tmp_path, interval_s=0.01, job=launcher)
    follower.poll()
    assert follower.history[-1]["states"] == {0: "running", 1: "running"}
    assert "(running)" in follower.status.value
    follower.start()
    launcher.end(-9)
    follower._thread.join(timeout=60)
    assert not follower._thread.is_alive(), "the thread goes on after the job ended"
    assert follower.history[-1]["states"] == {0: "stopped", 1: "stopped"}
    assert "(stopped: ranks 0, 1 stopped (no end written" in follower.status.value
