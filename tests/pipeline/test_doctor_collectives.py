"""A collective mismatch planted in a real gloo job: rank 1 calls one more ``all_reduce``.

The others go on to a ``barrier`` and wait there; rank 1 waits in its 8th ``all_reduce``.
Live, the doctor reads it from the ranks' stacks; after the fact, from the Flight Recorder
dumps the ranks write themselves. On gloo with torch 2.9 the process group does not dump on a
timeout (``TORCH_FR_DUMP_TEMP_FILE`` alone leaves no file): gloo raises the timeout in the
rank's call, and the job dumps its own buffer (``_dump_fr_trace``) when it catches it, to
``TORCH_FR_DUMP_TEMP_FILE + rank`` as NCCL would. The buffer records collectives only, each
"scheduled", with the frames that called it.

The dump jobs are run once for the module (they end by themselves once gloo's short timeout
fires); the pure tests of the alignment read the dumps they wrote.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
from built_once import built_once

from explorer.errors import InputError
from explorer.pipeline.analysis.collectives import align, diagnose_dumps, first_mismatch, lost_start
from explorer.pipeline.runtime.doctor import Diagnosis, doctor
from explorer.pipeline.traces.flight_recorder import read_dumps
from explorer.processes import free_port, rank_env
from tests.pipeline.conftest import alive, read_again_from_the_folder

#: A back-stop for reaching the hang (imports and rendezvous of 3 ranks on a busy machine).
REACH_S = 240.0
#: gloo's timeout in the dump jobs: the collectives before the mismatch take milliseconds.
TIMEOUT_S = 15
JOB = """
import datetime, os, sys, torch, torch.distributed as dist
import torch._C._distributed_c10d as c10d
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(sys.argv[1])))
rank = dist.get_rank()
grad = torch.ones(4)
try:
    for step in range(7 + (rank == 1)):  # rank 1 reduces once more than the others
        dist.all_reduce(grad)
    dist.barrier()
except RuntimeError:  # gloo's timeout, raised in the call: each rank dumps its own buffer
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    with open(f"{prefix}{rank}", "wb") as f:
        f.write(c10d._dump_fr_trace())
    if os.environ.get("FR_JSON"):
        with open(f"{os.environ['FR_JSON']}{rank}.json", "wb") as f:
            f.write(c10d._dump_fr_trace_json())
    sys.exit(3)
"""
ALL_REDUCE = next(i for i, t in enumerate(JOB.splitlines(), 1) if "dist.all_reduce" in t)
BARRIER = next(i for i, t in enumerate(JOB.splitlines(), 1) if "dist.barrier" in t)


def _start(script: Path, world: int, timeout_s: float, env: dict) -> list[subprocess.Popen]:
    """The ranks, as torchrun starts its workers."""
    port = free_port()
    return [
        subprocess.Popen(
            [sys.executable, str(script), str(timeout_s)],
            env={**rank_env(r, world, port, threads=1), **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(world)
    ]


def _end(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait(timeout=30)
    assert not any(alive(p.pid) for p in procs)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """Two real jobs that hung and dumped: 3 ranks (pickle and JSON), 2 ranks with a buffer of 4."""

    def launch():
        root = tmp_path_factory.mktemp("fr")
        script = root / "train.py"
        script.write_text(JOB)
        full, as_json, small = root / "full", root / "json", root / "small"
        for d in (full, as_json, small):
            d.mkdir()
        jobs = [
            _start(
                script,
                3,
                TIMEOUT_S,
                {
                    "TORCH_FR_BUFFER_SIZE": "64",
                    "TORCH_FR_DUMP_TEMP_FILE": f"{full}/fr_",
                    "FR_JSON": f"{as_json}/fr_",
                },
            ),
            _start(
                script,
                2,
                TIMEOUT_S,
                {"TORCH_FR_BUFFER_SIZE": "4", "TORCH_FR_DUMP_TEMP_FILE": f"{small}/fr_"},
            ),
        ]
        try:
            codes = [[p.wait(timeout=REACH_S) for p in job] for job in jobs]
        finally:
            for job in jobs:
                _end(job)
        assert codes == [[3, 3, 3], [3, 3]], "every rank times out in its collective and dumps"
        return script, full, as_json, small

    return built_once(tmp_path_factory, "doctor-collective-dumps", launch)


# -- from the dumps -------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_dumps_name_the_rank_with_one_more_all_reduce_and_the_counts(dumped):
    script, full, _, _ = dumped
    mismatch = first_mismatch(read_dumps(full))
    assert mismatch is not None
    assert (mismatch.how, mismatch.seq, mismatch.group) == ("op", 8, "the default group")
    calls = {r: (op, where, n) for r, op, where, n in mismatch.calls}
    assert calls == {
        0: ("barrier", f"{script}:{BARRIER}", 1),
        1: ("all_reduce", f"{script}:{ALL_REDUCE}", 8),
        2: ("barrier", f"{script}:{BARRIER}", 1),
    }
    assert mismatch.text == (
        f"collective #8 on the default group: rank 1 entered its 8th all_reduce at "
        f"{script}:{ALL_REDUCE}; ranks 0, 2 entered barrier at {script}:{BARRIER} after "
        "their 7th all_reduce: different collectives"
    )


@pytest.mark.slow
def test_alignment_by_sequence_id_holds_every_ranks_entry_per_collective(dumped):
    _, full, as_json, _ = dumped
    for folder in (full, as_json):  # the JSON dump holds the same entries, without frames
        aligned = align(read_dumps(folder))
        assert list(aligned) == ["0"]
        by_seq = aligned["0"]
        assert sorted(by_seq) == list(range(1, 9))
        assert all(set(by_seq[s]) == {0, 1, 2} for s in by_seq)
        assert {e.op for s in range(1, 8) for e in by_seq[s].values()} == {"all_reduce"}
        assert {r: e.op for r, e in by_seq[8].items()} == {
            0: "barrier",
            1: "all_reduce",
            2: "barrier",
        }
        assert {e.state for es in by_seq.values() for e in es.values()} == {"scheduled"}
    m = first_mismatch(read_dumps(as_json))
    assert m is not None and (m.seq, m.how) == (8, "op")
    assert {r: n for r, _, _, n in m.calls} == {0: 1, 1: 8, 2: 1}


@pytest.mark.slow
def test_a_ring_buffer_that_lost_the_start_is_said_and_counts_are_not_guessed(dumped):
    _, _, _, small = dumped
    dumps = read_dumps(small)
    assert [len(d.entries) for d in dumps.dumps.values()] == [4, 4]
    assert [lost_start(d, "0") for d in dumps.dumps.values()] == [5, 5]
    m = first_mismatch(dumps)
    assert m is not None and (m.seq, m.how) == (8, "op")
    assert {r: (op, n) for r, op, _, n in m.calls} == {
        0: ("barrier", None),
        1: ("all_reduce", None),
    }
    assert m.text.endswith(
        "different collectives (the ring buffer lost the start: rank 0 holds #5 on, rank 1 holds #5 on)"
    )


def _edited(src: Path, dst: Path, edit) -> None:
    """A copy of a real dump with ``edit(dump_dict)`` applied (the stdlib loads torch's pickle)."""
    data = pickle.loads(src.read_bytes())
    edit(data)
    dst.write_bytes(pickle.dumps(data))


@pytest.mark.slow
def test_a_rank_that_entered_a_collective_the_others_never_did_is_a_count_mismatch(
    dumped, tmp_path
):
    """The others' last collective cut from their dumps: rank 1 alone entered #8."""
    _, full, _, _ = dumped
    for r in (0, 1, 2):
        keep = (lambda d: None) if r == 1 else (lambda d: d.update(entries=d["entries"][:-1]))
        _edited(full / f"fr_{r}", tmp_path / f"fr_{r}", keep)
    m = first_mismatch(read_dumps(tmp_path))
    assert m is not None and (m.how, m.seq) == ("count", 8)
    assert m.text.startswith(
        "rank 1 entered collective #8 on the default group (its 8th all_reduce at "
    )
    assert m.text.endswith("; ranks 0, 2 never did (their last: #7)")


@pytest.mark.slow
def test_a_rank_whose_last_collective_completed_is_not_said_to_wait_in_it(dumped, tmp_path):
    """NCCL marks a collective the GPU finished "completed" (gloo leaves "scheduled"): a rank
    whose dump ends on one was in no collective when it dumped."""
    _, full, _, _ = dumped

    def completed(d: dict) -> None:
        for e in d["entries"]:
            e["state"] = "completed"

    for r in (0, 1, 2):
        _edited(full / f"fr_{r}", tmp_path / f"fr_{r}", completed if r != 1 else (lambda d: None))
    v = diagnose_dumps(read_dumps(tmp_path))
    assert [v.state(r).activity for r in (0, 1, 2)] == ["done", "waiting", "done"]
    assert v.state(0).describe().startswith("rank 0 had completed every collective it entered [")
    assert "rank 1 waited in dist.all_reduce" in v.state(1).describe()


@pytest.mark.slow
def test_one_call_with_other_sizes_is_a_sizes_mismatch(dumped, tmp_path):
    _, full, _, _ = dumped

    def bigger(d: dict) -> None:
        d["entries"][2]["input_sizes"] = [[8]]

    for r in (0, 1, 2):
        _edited(full / f"fr_{r}", tmp_path / f"fr_{r}", bigger if r == 2 else (lambda d: None))
    m = first_mismatch(read_dumps(tmp_path))
    assert m is not None and (m.how, m.seq) == ("sizes", 3)
    assert m.text == (
        "collective #3 on the default group: rank 2 entered all_reduce of sizes [[8]] ['Float']; "
        "ranks 0, 1 entered all_reduce of sizes [[4]] ['Float']: different sizes"
    )


@pytest.mark.slow
def test_doctor_and_read_give_the_verdict_from_the_dumps_folder(dumped):
    script, full, _, _ = dumped
    for command in (["doctor", str(full), "--json"], ["read", str(full), "--json"]):
        out = subprocess.run(
            [sys.executable, "-m", "explorer", *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 1, out.stderr
        got = json.loads(out.stdout)
        assert (got["kind"], got["verdict"], got["source"]) == (
            "hang",
            "collective-mismatch",
            "flight-recorder",
        )
        assert got["mismatch"]["seq"] == 8
        assert [(s["rank"], s["op"]) for s in got["ranks"]] == [
            (0, "barrier"),
            (1, "all_reduce"),
            (2, "barrier"),
        ]
        assert got["description"].startswith(
            "collective #8 on the default group: rank 1 entered its 8th all_reduce"
        )


@pytest.mark.slow
def test_a_rank_missing_is_a_partial_answer_that_names_it(dumped, tmp_path):
    _, full, _, _ = dumped
    for r in (0, 1):
        (tmp_path / f"fr_{r}").write_bytes((full / f"fr_{r}").read_bytes())
    v = diagnose_dumps(read_dumps(tmp_path))
    assert v.unseen == (2,)
    assert v.verdict == "collective-mismatch"
    assert v.describe().endswith("(not seen: rank 2)")
    assert v.state(2).activity == "unseen"


@pytest.mark.slow
def test_broken_and_mixed_dumps_are_one_line_and_exit_2(dumped, tmp_path):
    _, full, as_json, small = dumped
    cases = {}
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "fr_0").write_bytes((full / "fr_0").read_bytes()[:300])
    (cut / "fr_1").write_bytes((full / "fr_1").read_bytes())
    cases[cut] = "cut short"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "fr_0").write_bytes(pickle.dumps(Path("/x")))
    cases[foreign] = "not a Flight Recorder pickle"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "fr_0").write_bytes((full / "fr_0").read_bytes())
    (mixed / "fr_1").write_bytes((small / "fr_1").read_bytes())
    cases[mixed] = "disagree on the job's size"
    named = tmp_path / "named"
    named.mkdir()
    (named / "jobA_0").write_bytes((full / "fr_0").read_bytes())
    (named / "jobB_0").write_bytes((small / "fr_0").read_bytes())
    cases[named] = "different jobs' dumps"
    bad_json = tmp_path / "badjson"
    bad_json.mkdir()
    (bad_json / "fr_0.json").write_bytes((as_json / "fr_0.json").read_bytes()[:500])
    cases[bad_json] = "cut short or not JSON"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing here")
    cases[empty] = "no Flight Recorder dump"
    for folder, words in cases.items():
        out = subprocess.run(
            [sys.executable, "-m", "explorer", "doctor", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, (folder, out.stdout, out.stderr)
        assert words in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    with pytest.raises(InputError, match="cut short"):
        read_dumps(cut)


# -- live ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_same_mismatch_live_names_the_different_collectives(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(JOB)
    ranks = _start(script, 3, 600, {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/fr_"})
    pids = [p.pid for p in ranks]
    try:
        d = _until(pids, _apart, save=tmp_path / "s")
    finally:
        _end(ranks)
    read_again_from_the_folder(tmp_path / "s", d.verdict)
    v = d.verdict
    assert v.verdict == "collective-mismatch" and v.mismatch is not None
    assert v.describe() == (
        f"rank 1 waits in all_reduce ({script}:{ALL_REDUCE}); ranks 0, 2 wait in barrier "
        f"({script}:{BARRIER}): different collectives, so none of them can complete"
    )
    assert d.live == 3


def _apart(d: Diagnosis) -> bool:
    """Rank 1 in all_reduce, ranks 0 and 2 in barrier: permanent once seen (rank 1 never joins them)."""
    ops = {s.rank: (s.activity, s.op) for s in d.verdict.ranks}
    return ops == {
        0: ("waiting", "barrier"),
        1: ("waiting", "all_reduce"),
        2: ("waiting", "barrier"),
    }


def _until(pids: list[int], ready, save=None) -> Diagnosis:
    deadline = time.monotonic() + REACH_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = doctor(pids, save=save)
        except InputError as exc:  # ranks not started yet
            last = exc
        else:
            assert not last.refused, last.refused
            if ready(last):
                return last
        time.sleep(0.5)
    raise AssertionError(f"the mismatch never became visible in {REACH_S:.0f} s: {last}")
