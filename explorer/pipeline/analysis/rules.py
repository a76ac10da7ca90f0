"""Rewrite rules: named, size-independent changes to a schedule that a fix can be made of.

Each rule is a small pure function ``Schedule -> Schedule`` with a one-line description, so a
fix found by the search (:mod:`explorer.pipeline.analysis.repair`) can be said in words, re-checked at
other sizes (``--rules`` on ``check``, ``schedule`` and ``run``) and run for real. Rules that
reorder only move exchanges among the exchange slots of one step of one rank: compute stays
where it was, and so do the steps, so a send still meets its receive in the same step.

- ``grads-first``: within a step, gradient exchanges before activation exchanges, on every
  stage. A stage running a forward then sends its gradient before it receives the next
  activation, and its neighbour, in a backward step, receives that gradient before it sends
  its activation: the pair still meets under blocking P2P. This is DeepSpeed's own fix
  (issue #2800, PR #2862).
- ``parity``: within a step, even stages send before they receive and odd stages receive
  before they send (Megatron's order for blocking exchanges).
- ``defer-recv``: a receive moves to just before the compute that consumes it in the same
  step (the idea of PyTorch PR #178815); on its own it breaks the pairing of blocking P2P.
- ``buffers+1``: one more buffer per stage, buffer ids re-assigned as micro-batch modulo the
  count (DeepSpeed's original ``+ 1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.buffers import with_buffers
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

_SENDS = (int(Kind.SEND_ACTIVATION), int(Kind.SEND_GRAD))
_RECVS = (int(Kind.RECV_ACTIVATION), int(Kind.RECV_GRAD))
_GRADS = (int(Kind.SEND_GRAD), int(Kind.RECV_GRAD))
_P2P = _SENDS + _RECVS


@dataclass(frozen=True)
class Rule:
    """One rewrite: its name (for ``--rules``), what it does in words, and the function."""

    name: str
    description: str
    apply: Callable[[Schedule], Schedule]


def _permute_exchanges(schedule: Schedule, key: np.ndarray) -> Schedule:
    """Within each (rank, step), put the exchange rows in the order of ``key`` (stable), in the
    exchange rows' own slots; every other row keeps its place."""
    n = len(schedule)
    if not n:
        return schedule
    p2p = np.isin(schedule.kind, _P2P)
    group = schedule.rank.astype(np.int64) * (schedule.num_steps + 1) + schedule.step
    rows = np.nonzero(p2p)[0]
    # Slots stay, content moves: sort the exchange rows by (group, key, old position).
    moved = rows[np.lexsort((rows, key[rows], group[rows]))]
    order = np.arange(n)
    order[rows] = moved
    return _take(schedule, order)


def _take(schedule: Schedule, order: np.ndarray) -> Schedule:
    cols = {
        name: getattr(schedule, name)[order]
        for name in ("rank", "step", "kind", "stage", "microbatch", "buffer")
    }
    return schedule.replace(**cols)


def grads_first(schedule: Schedule) -> Schedule:
    """Gradient exchanges before activation exchanges within every step."""
    key = np.where(np.isin(schedule.kind, _GRADS), 0, 1)
    return _with_rule(_permute_exchanges(schedule, key), "grads-first")


def parity(schedule: Schedule) -> Schedule:
    """Even stages send first, odd stages receive first, within every step."""
    send = np.isin(schedule.kind, _SENDS)
    even = schedule.stage % 2 == 0
    key = np.where(send == even, 0, 1)
    return _with_rule(_permute_exchanges(schedule, key), "parity")


def defer_receives(schedule: Schedule) -> Schedule:
    """Each receive placed just before its consumer (the compute of its micro-batch) in the same step."""
    n = len(schedule)
    if not n:
        return schedule
    kind = schedule.kind.astype(np.int64)
    pos = np.arange(n, dtype=float)
    group = schedule.rank.astype(np.int64) * (schedule.num_steps + 1) + schedule.step
    consumer_kind = {
        int(Kind.RECV_ACTIVATION): (int(Kind.FORWARD),),
        int(Kind.RECV_GRAD): (int(Kind.BACKWARD), int(Kind.BACKWARD_INPUT)),
    }
    for recv, consumers in consumer_kind.items():
        r = np.nonzero(kind == recv)[0]
        c = np.nonzero(np.isin(kind, consumers))[0]
        if not len(r) or not len(c):
            continue
        ckey = (group[c] * (schedule.num_stages + 1) + schedule.stage[c]) * (
            schedule.num_microbatches + 1
        ) + schedule.microbatch[c]
        rkey = (group[r] * (schedule.num_stages + 1) + schedule.stage[r]) * (
            schedule.num_microbatches + 1
        ) + schedule.microbatch[r]
        order = np.argsort(ckey, kind="stable")
        at = np.searchsorted(ckey[order], rkey)
        at = np.clip(at, 0, len(order) - 1)
        found = ckey[order][at] == rkey
        pos[r[found]] = pos[c[order][at[found]]] - 0.5 + 1e-6 * np.arange(found.sum())
    order = np.lexsort((pos, group))
    return _with_rule(_take(schedule, order), "defer-recv")


def one_more_buffer(schedule: Schedule) -> Schedule:
    """One more buffer on every stage, ids re-assigned as micro-batch modulo the count."""
    return _with_rule(with_buffers(schedule, [b + 1 for b in schedule.buffers]), "buffers+1")


def _with_rule(schedule: Schedule, name: str) -> Schedule:
    earlier = schedule.params.get("rules", ())  # a schedule file's params may hold anything
    applied = (*(earlier if isinstance(earlier, Iterable) else (earlier,)), name)
    return schedule.replace(params={**schedule.params, "rules": applied})


RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule(
            "grads-first",
            "within a step, exchange gradients before activations (DeepSpeed's fix: send the "
            "gradient before receiving the next activation; the neighbour receives it before sending)",
            grads_first,
        ),
        Rule(
            "parity",
            "within a step, even stages send before receiving and odd stages receive before sending "
            "(Megatron's order)",
            parity,
        ),
        Rule(
            "defer-recv",
            "move each receive to just before the compute that consumes it (PyTorch PR #178815's idea)",
            defer_receives,
        ),
        Rule("buffers+1", "one more buffer per stage (DeepSpeed's original + 1)", one_more_buffer),
    )
}


def parse_rules(text: str | Sequence[str]) -> list[Rule]:
    """``"grads-first,buffers+1"`` into rules, in the order given."""
    parts = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    names = [t for t in parts if t]
    if isinstance(text, str) and text.strip() and len(names) != len(parts):
        raise InputError(  # "--rules ," or "a,,b": an empty name is a typo, not "no rule"
            f"--rules {text.strip()[:40]!r} has an empty rule name; the rules are {', '.join(RULES)}"
        )
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise InputError(
            f"--rules: unknown rule {unknown[0][:40]!r}; the rules are {', '.join(RULES)}"
        )
    if len(set(names)) != len(names):
        raise InputError("--rules: a rule is named twice; name each once")
    return [RULES[n] for n in names]


def apply_rules(schedule: Schedule, rules: Iterable[Rule]) -> Schedule:
    """``schedule`` with each rule applied in turn."""
    for rule in rules:
        schedule = rule.apply(schedule)
    return schedule


def changed_cells(before: Schedule, after: Schedule) -> list[tuple[int, int]]:
    """``(stage, step)`` cells whose instructions differ (order, buffer or content) between two
    versions of one schedule, e.g. before and after a fix's rules."""

    def cells(s: Schedule) -> dict:  # noqa: E306
        out: dict = {}
        for r, t, k, st, m, b in zip(
            s.rank.tolist(),
            s.step.tolist(),
            s.kind.tolist(),
            s.stage.tolist(),
            s.microbatch.tolist(),
            s.buffer.tolist(),
        ):
            out.setdefault((r, t), []).append((k, st, m, b))
        return out

    old, new = cells(before), cells(after)
    changed = set()
    for key in old.keys() | new.keys():
        if old.get(key) != new.get(key):
            for _kind, st, _mb, _buf in old.get(key, []) + new.get(key, []):
                changed.add((st, key[1]))
    return sorted(changed)


__all__ = [
    "Rule",
    "grads_first",
    "parity",
    "defer_receives",
    "one_more_buffer",
    "RULES",
    "parse_rules",
    "apply_rules",
    "changed_cells",
]
