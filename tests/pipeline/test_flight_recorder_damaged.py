"""A damaged Flight Recorder dump is bad input (one line), never a traceback: seeded byte damage.

Damaged pickles fail inside any opcode (OverflowError on a length, AttributeError on an append
to the wrong container, ...), not only with ``UnpicklingError``; a JSON dump can hold any type
where a number was. The shape of the dump is torch 2.9's (``entries``, ``pg_config``); the
real dumps are read in ``test_doctor_collectives.py``.
"""

from __future__ import annotations

import json
import pickle
import random

import pytest

from explorer.errors import InputError
from explorer.pipeline.traces.flight_recorder import read_dump

DUMP = {
    "version": "2.9",
    "entries": [
        {
            "collective_seq_id": 1,
            "profiling_name": "gloo:all_reduce",
            "process_group": ["0", "default_pg"],
            "input_sizes": [[4]],
            "input_dtypes": ["Float"],
            "frames": [{"filename": "train.py", "line": 9, "name": "main"}],
        }
    ],
    "pg_config": {"0": {"ranks": "[0, 1]"}},
}


def _damaged(raw: bytes, rng: random.Random) -> bytes:
    how = rng.randrange(4)
    if how == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if how == 1:
        out = bytearray(raw)
        for _ in range(rng.randrange(1, 5)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if how == 2:
        return raw[: rng.randrange(len(raw))]
    return raw.replace(b"1", rng.choice([b"[]", b"{}", b"null", b'"x"', b"1e999"]))


@pytest.mark.parametrize("form", ["pickle", "json"])
def test_damaged_dumps_are_refused_in_one_line(tmp_path, form):
    raw = pickle.dumps(DUMP) if form == "pickle" else json.dumps(DUMP).encode()
    assert read_dump(_write(tmp_path, raw, 0)).entries  # the undamaged dump reads
    rng = random.Random(20261126)
    refused = 0
    for i in range(600):
        path = _write(tmp_path, _damaged(raw, rng), i)
        try:
            read_dump(path)
        except InputError as exc:
            assert "\n" not in str(exc) and path.name in str(exc)
            refused += 1
    assert refused > 300  # most damage is caught as such; the rest still reads as a dump


def _write(folder, raw: bytes, i: int):
    path = folder / (f"fr_{i}.json" if raw[:1] == b"{" else f"fr_{i}")
    path.write_bytes(raw)
    return path
