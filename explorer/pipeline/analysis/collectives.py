"""A collective mismatch read from the ranks' Flight Recorder dumps, after the fact.

Each group's collectives carry a number on that group (``collective_seq_id``, 1 first), the
same on every rank for the same call. Aligned by group and number, the first number where the
ranks' records differ is the mismatch:

- ``op``: the ranks entered different calls there (rank 1 its 8th ``all_reduce``, ranks 0 and 2
  a ``barrier`` after their 7th);
- ``sizes``: one call with other shapes or dtypes;
- ``count``: some ranks entered a collective the others never did (their buffers end before it).

A ring buffer holds the last N entries: where a rank's first number on a group is above 1,
its start is lost, and counts of one op ("its 8th all_reduce") are only given where every
earlier entry is still held. Pure: dumps are data (:mod:`explorer.pipeline.traces.flight_recorder`).
"""

from __future__ import annotations

from typing import Optional

from explorer.pipeline.analysis.hang import CollectiveMismatch, HangVerdict, RankState
from explorer.pipeline.traces.flight_recorder import Entry, FlightDumps, RankDump


def align(dumps: FlightDumps) -> dict[str, dict[int, dict[int, Entry]]]:
    """Group -> collective number -> rank -> that rank's entry (collectives only, no P2P)."""
    out: dict[str, dict[int, dict[int, Entry]]] = {}
    for rank, dump in sorted(dumps.dumps.items()):
        for e in dump.entries:
            if not e.is_p2p:
                out.setdefault(e.group, {}).setdefault(e.seq, {})[rank] = e
    return out


def lost_start(dump: RankDump, group: str) -> Optional[int]:
    """The first collective number the rank's buffer still holds on ``group``, where above 1."""
    seqs = [e.seq for e in dump.entries if e.group == group and not e.is_p2p]
    return min(seqs) if seqs and min(seqs) > 1 else None


def first_mismatch(dumps: FlightDumps) -> Optional[CollectiveMismatch]:
    """The first number on any group where the ranks' records differ (see the module docstring)."""
    found = []
    for group, by_seq in align(dumps).items():
        members = _members(dumps, group)
        last = {r: max((s for s, es in by_seq.items() if r in es), default=0) for r in members}
        for seq in sorted(by_seq):
            entries = by_seq[seq]
            held = {r for r in members if _holds(dumps.dumps.get(r), group, seq)}
            how = _how(entries, held)
            if how:
                found.append(_mismatch(dumps, group, seq, entries, how, last))
                break
    return min(found, key=lambda m: (m.seq or 0, m.group)) if found else None


def diagnose_dumps(dumps: FlightDumps) -> HangVerdict:
    """The verdict from dumps: the first mismatch, with each rank's last collective as its state."""
    states = tuple(_state(dumps, r) for r in range(dumps.world))
    unseen = tuple(dumps.missing)
    mismatch = first_mismatch(dumps)
    if mismatch is None:
        return HangVerdict("no-wait", states, unseen=unseen)
    return HangVerdict("collective-mismatch", states, mismatch=mismatch, unseen=unseen)


# -- pieces -------------------------------------------------------------------------------------


def _members(dumps: FlightDumps, group: str) -> list[int]:
    """The ranks of ``group`` that left a dump (the group's own list where a dump holds it)."""
    for d in dumps.dumps.values():
        ranks = d.groups.get(group) or (d.groups.get("") if group == "0" else None)
        if ranks:
            return [r for r in ranks if r in dumps.dumps]
    return sorted(dumps.dumps)


def _holds(dump: Optional[RankDump], group: str, seq: int) -> bool:
    """Whether the rank's buffer still covers number ``seq`` (its start not lost before it)."""
    if dump is None:
        return False
    start = lost_start(dump, group)
    return start is None or seq >= start


def _how(entries: dict[int, Entry], held: set[int]) -> str:
    """How the ranks differ at one number: "op", "sizes", "count" or "" (they agree)."""
    present = {r: e for r, e in entries.items() if r in held}
    if not present:
        return ""
    if len({e.op for e in present.values()}) > 1:
        return "op"
    if len({(e.sizes, e.dtypes) for e in present.values()}) > 1:
        return "sizes"
    if held - set(present):
        return "count"
    return ""


def _mismatch(
    dumps: FlightDumps,
    group: str,
    seq: int,
    entries: dict[int, Entry],
    how: str,
    last: dict[int, int],
) -> CollectiveMismatch:
    calls = tuple((r, e.op, e.where, _count(dumps.dumps[r], e)) for r, e in sorted(entries.items()))
    name = _group_name(entries)
    lost = _lost_words(dumps, group)
    if how == "count":
        absent = sorted(r for r in last if r not in entries)
        e = next(iter(entries.values()))
        text = (
            f"{_ranks(sorted(entries))} entered collective #{seq} on {name} "
            f"({_nth(calls[0][3], e.op)}{_at(e.where)}); {_ranks(absent)} never did "
            f"(their last: #{max(last[r] for r in absent)})"
        )
    else:
        by_call: dict[tuple, list[int]] = {}
        for r, e in sorted(entries.items()):
            key = (e.op, e.where) if how == "op" else (e.op, e.sizes, e.dtypes)
            by_call.setdefault(key, []).append(r)
        ordered = sorted(by_call.items(), key=lambda kv: (len(kv[1]), kv[1]))
        odd = entries[ordered[0][1][0]].op  # the call of the fewest ranks: the odd one out
        parts = []
        for i, (_key, ranks) in enumerate(ordered):
            e, dump = entries[ranks[0]], dumps.dumps[ranks[0]]
            if how != "op":
                detail = f"{e.op} of sizes {[list(x) for x in e.sizes]} {list(e.dtypes)}"
            elif i == 0:
                detail = f"{_nth(_count(dump, e), e.op)}{_at(e.where)}"
            else:
                before = _count_before(dump, e, odd)
                after = "" if before is None else f" after their {_nth(before, odd)[4:]}"
                detail = f"{e.op}{_at(e.where)}{after}"
            parts.append(f"{_ranks(ranks)} entered {detail}")
        text = f"collective #{seq} on {name}: " + "; ".join(parts)
        text += ": different collectives" if how == "op" else ": different sizes"
    return CollectiveMismatch(
        group=name,
        how=how,
        calls=calls,
        seq=seq,
        text=text + (f" ({lost})" if lost else ""),
        lost=lost,
    )


def _count(dump: RankDump, entry: Entry) -> Optional[int]:
    """How many ``entry.op`` the rank had entered on the group up to ``entry`` (None: start lost)."""
    if lost_start(dump, entry.group) is not None:
        return None
    return sum(
        1
        for e in dump.entries
        if e.group == entry.group and e.op == entry.op and e.seq <= entry.seq
    )


def _count_before(dump: RankDump, entry: Entry, op: str) -> Optional[int]:
    """How many ``op`` the rank had entered on the group before ``entry`` (None: start lost)."""
    if lost_start(dump, entry.group) is not None:
        return None
    return sum(
        1 for e in dump.entries if e.group == entry.group and e.op == op and e.seq < entry.seq
    )


def _nth(n: Optional[int], op: str) -> str:
    if n is None:
        return op
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"its {n}{suffix} {op}"


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _group_name(entries: dict[int, Entry]) -> str:
    e = next(iter(entries.values()))
    return (
        "the default group"
        if e.group_desc == "default_pg" or e.group == "0"
        else f"group {e.group_desc or e.group}"
    )


def _lost_words(dumps: FlightDumps, group: str) -> str:
    lost = {r: lost_start(d, group) for r, d in sorted(dumps.dumps.items())}
    named = [f"rank {r} holds #{s} on" for r, s in lost.items() if s is not None]
    if not named:
        return ""
    return "the ring buffer lost the start: " + ", ".join(named)


def _state(dumps: FlightDumps, rank: int) -> RankState:
    """A rank as its dump leaves it: waiting in its last collective, done with it (NCCL marks a
    collective the GPU finished "completed": the rank was not in it), or unseen (no dump)."""
    dump = dumps.dumps.get(rank)
    if dump is None:
        return RankState(rank=rank, pid=None, activity="unseen", source="none", note="no dump")
    if not dump.entries:
        return RankState(
            rank=rank,
            pid=None,
            activity="idle",
            source="flight-recorder",
            note="no collective recorded",
        )
    last = max(dump.entries, key=lambda e: (e.created_ns, e.seq))
    group = "the default group" if last.group == "0" else f"group {last.group_desc or last.group}"
    return RankState(
        rank=rank,
        pid=None,
        activity="done" if last.state == "completed" else "waiting",
        op=last.op,
        where=last.where,
        source="flight-recorder",
        note=f"last collective #{last.seq} on {group} ({last.state}){_at(last.where)}",
    )


__all__ = ["align", "diagnose_dumps", "first_mismatch", "lost_start"]
