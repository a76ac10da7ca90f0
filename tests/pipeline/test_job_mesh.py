"""The user's ``--mesh``: parsed strictly, and checked against what the job's folder says (fast tier).

The mesh is read as ``init_device_mesh`` reads its shape, outermost dimension first; a folder
whose schedule, rank files, world size or ranks' own start lines contradict it is refused with
what to change, never read with a numbering it does not have. The read of a real job numbered
pipe-major is in ``test_scale_job.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_in_process import call_cli
from test_job_numbering import _traced_folder

from explorer.errors import InputError
from explorer.pipeline.traces.job_folder import PIPE_MAJOR, REPLICA_MAJOR, layout
from explorer.pipeline.traces.mesh import MAX_RANKS, Mesh, parse_mesh


@pytest.mark.parametrize(
    "text, mesh",
    [
        ("pp=8,dp=128", Mesh(8, 128, PIPE_MAJOR)),
        ("dp=128,pp=8", Mesh(8, 128, REPLICA_MAJOR)),
        (" PP = 2 , dp=3 ", Mesh(2, 3, PIPE_MAJOR)),
        ("pp=1,dp=1", Mesh(1, 1, PIPE_MAJOR)),
    ],
)
def test_a_mesh_is_read_outermost_dimension_first(text, mesh):
    assert parse_mesh(text) == mesh
    assert parse_mesh(mesh.spelled()) == mesh


@pytest.mark.parametrize(
    "text, says",
    [
        ("pp=8", "dp is missing"),
        ("dp=8", "pp is missing"),
        ("tp=2,pp=4,dp=8", "only pp and dp are laid out"),
        ("pp=4,dp=8,ep=2", "only pp and dp"),
        ("pp=0,dp=8", "pp must be at least 1"),
        ("pp=4,pp=4,dp=2", "names pp twice"),
        ("rows=4,cols=2", "not 'rows'"),
        ("pp=4;dp=2", "NAME=SIZE pairs"),
        ("pp=-1,dp=2", "NAME=SIZE pairs"),
        ("pp=1e9,dp=2", "NAME=SIZE pairs"),
        ("pp=99999999999,dp=2", "NAME=SIZE pairs"),
        ("", "NAME=SIZE pairs"),
        (f"pp={MAX_RANKS},dp=2", "more than the 16,777,216"),
    ],
)
def test_a_bad_mesh_names_the_constraint(text, says):
    with pytest.raises(InputError, match=says):
        parse_mesh(text)


def _engine_folder(folder: Path, pipeline_ranks: int, ranks: int) -> Path:
    folder.mkdir()
    schedule = {"stage_to_rank": list(range(pipeline_ranks))}
    (folder / "spec.json").write_text(json.dumps({"run_id": "r", "schedule": schedule}))
    for rank in range(ranks):
        (folder / f"rank{rank}.jsonl").write_text("")
    return folder


def test_the_mesh_numbers_a_folder_that_does_not_say(tmp_path):
    folder = _engine_folder(tmp_path / "job", 4, 32)
    assert layout(folder).order == REPLICA_MAJOR  # the default: explorer run's copies
    lay = layout(folder, parse_mesh("pp=4,dp=8"))
    assert (lay.order, lay.replicas, lay.world) == (PIPE_MAJOR, 8, 32)
    assert (lay.replica_of(9), lay.local_of(9), lay.rank_at(1, 1)) == (1, 1, 9)
    wider = layout(folder, parse_mesh("dp=10,pp=4"))  # the last two replicas' files are missing
    assert (wider.order, wider.replicas, wider.ranks) == (REPLICA_MAJOR, 10, 40)


@pytest.mark.parametrize(
    "mesh, says",
    [
        ("pp=2,dp=16", "runs on 4 ranks: give pp=4"),
        ("pp=4,dp=7", "has a file of rank 31: give dp=8 or more"),
    ],
)
def test_a_mesh_the_folder_contradicts_is_refused(tmp_path, mesh, says):
    folder = _engine_folder(tmp_path / "job", 4, 32)
    with pytest.raises(InputError, match=says):
        layout(folder, parse_mesh(mesh))


def test_a_mesh_against_the_ranks_own_start_lines_is_refused(tmp_path):
    folder = tmp_path / "traced"
    folder.mkdir()
    _traced_folder(folder, 4, 8, lambda r: (r // 8, r % 8))  # DeepSpeed's: pipe-major
    assert layout(folder, parse_mesh("pp=4,dp=8")).order == PIPE_MAJOR
    with pytest.raises(InputError, match="say they were numbered pipe-major"):
        layout(folder, parse_mesh("dp=8,pp=4"))
    with pytest.raises(InputError, match="the job had 32: give dp=8"):
        layout(folder, parse_mesh("pp=4,dp=9"))


@pytest.mark.parametrize(
    "mesh, says",
    [
        ("", "argument --mesh: takes NAME=SIZE pairs"),
        ("pp=4", "argument --mesh: needs both pp and dp"),
        ("pp=4,dp=3", "--mesh pp=4,dp=3 says pp=4, but the schedule of"),
    ],
)
def test_the_command_refuses_a_bad_or_contradicted_mesh_in_one_line(tmp_path, mesh, says):
    folder = _engine_folder(tmp_path / "job", 2, 6)
    out = call_cli(["read", str(folder), "--mesh", mesh])
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
