"""TORCH_TRACE logs kept gzipped (``dedicated_log_torch_trace_*.log.gz``, as the lessons' recorded
run is stored) are found and read like plain ones; a damaged one is one line naming it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from explorer.compile.traces.detect import recognise
from explorer.compile.traces.torch_trace import read_torch_trace
from explorer.lessons.recorded import RECORDED, read_recorded

PREFIX = "V1124 09:59:29.548000 7965 torch/_dynamo/convert_frame.py:249] "


def _log() -> bytes:
    """Two compiles of one frame, the second for a failed guard."""
    lines = []
    for attempt, reasons in ((0, None), (1, ["self.mode == 0"])):
        ids = {"frame_id": 0, "frame_compile_id": attempt, "attempt": 0}
        lines.append(PREFIX + json.dumps({"dynamo_start": {"stack": []}, **ids}))
        if reasons:
            payload = {"name": "recompile_reasons", "encoding": "json"}
            lines.append(PREFIX + json.dumps({"artifact": payload, **ids, "has_payload": "x"}))
            lines.append("\t" + json.dumps(reasons))
    return ("\n".join(lines) + "\n").encode()


def test_a_gzipped_log_is_found_and_reads_as_the_plain_one(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "dedicated_log_torch_trace_rank_0_ab.log"
    zipped = tmp_path / "zipped" / "dedicated_log_torch_trace_rank_0_ab.log.gz"
    for path in (plain, zipped):
        path.parent.mkdir()
    plain.write_bytes(_log())
    zipped.write_bytes(gzip.compress(_log()))
    assert recognise(zipped.parent) and recognise(zipped)
    a, b = read_torch_trace(plain), read_torch_trace(zipped)
    assert (a.records, a.pid, a.rank, len(a.compiles)) == (b.records, b.pid, b.rank, 2)
    assert [c.reasons for c in a.compiles] == [c.reasons for c in b.compiles]
    assert b.compiles[1].reasons == ["self.mode == 0"] and b.rank == 0


def test_read_on_the_recorded_run_as_it_is_kept_gives_the_lessons_report(explorer_cli) -> None:
    """The lesson reads an unzipped copy; explorer read on the gzipped folder says the same."""
    folder = RECORDED / "compile-limit"
    out = explorer_cli("read", str(folder), "--json")
    assert out.returncode == 1, out.stderr  # a finding: the recompile limit was hit
    doc = json.loads(out.stdout)
    assert doc["cause"] == read_recorded("compile-limit").diagnosis.cause == "eager-fallback"
    assert [c["iteration"] for c in doc["compiles"]] == [0, 1, 2, 8]  # the profile beside it read
    alone = explorer_cli("read", str(folder / "torch_trace"))
    assert alone.returncode == 1 and "Eager fallback after the recompile limit" in alone.stdout


def test_a_cut_gzipped_log_reads_as_a_cut_plain_one(explorer_cli, tmp_path: Path) -> None:
    """A job stopped while it wrote its gzipped log leaves a stream cut short: it was refused
    (exit 2) where the same log cut plain was read as cut (exit 1, the cut named). Now both are
    read up to the cut, even one that ends exactly at a line's end (no cut line in its text:
    the stream's missing end marker says it)."""
    kept = RECORDED / "compile-limit" / "torch_trace" / "dedicated_log_torch_trace_limit.log.gz"
    plain = gzip.decompress(kept.read_bytes())
    for cut_at in (len(plain) // 2, plain.index(b"\n", len(plain) // 2) + 1):
        folder = tmp_path / f"cut{cut_at}"
        folder.mkdir()
        (folder / kept.name).write_bytes(_cut_stream(plain, cut_at))
        out = explorer_cli("read", str(folder), "--json")
        doc = json.loads(out.stdout)
        assert out.returncode == 1 and doc["ok"] is False, out.stderr
        assert doc["failure"]["kind"] == "unfinished" and "cut line" in doc["failure"]["message"]


def _cut_stream(data: bytes, n: int) -> bytes:
    """A gzip stream of ``data`` that stops right after its first ``n`` bytes were written and
    flushed, without its end marker: what a killed writer leaves."""
    import zlib

    writer = zlib.compressobj(wbits=31)
    return writer.compress(data[:n]) + writer.flush(zlib.Z_SYNC_FLUSH)


def test_a_damaged_gzipped_log_is_one_line_naming_it(explorer_cli, tmp_path: Path) -> None:
    whole = bytearray(gzip.compress(_log() * 200))
    whole[-8:-4] = bytes(b ^ 0xFF for b in whole[-8:-4])  # its checksum no longer matches
    (tmp_path / "dedicated_log_torch_trace_rank_0_ab.log.gz").write_bytes(bytes(whole))
    out = explorer_cli("read", ".", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "'dedicated_log_torch_trace_rank_0_ab.log.gz': cannot be read" in out.stderr
    assert "complete gzip file" in out.stderr, out.stderr
