"""The P2P contract: every message's tuple checked against the receive it meets.

A send and its receive are paired by the transport's own rule, the one the deadlock search
uses (:func:`explorer.pipeline.analysis.p2p.match`: on each channel, one per sending stage and
direction, the k-th send meets the k-th receive). Where messages travel untagged on one channel
per rank pair (``pairing="peer"``, as in Megatron-LM), the channel is the rank pair instead, so
where a stage's next and previous rank are the same peer, messages of both directions pair
first in, first out across stages.

Each pair is then compared on what its lines recorded (:mod:`explorer.pipeline.traces.messages`):
the sender's tuple against the receiver's buffer. Kinds, in the order a pair is checked:

- ``swap``: untagged, a message met a receive meant for another stage or direction;
- ``count``: the tuples have different lengths;
- ``reuse``: a pooled receive buffer, allocated for an earlier message, no longer fits (dtype
  or shape);
- ``dtype`` / ``shape``: a fresh buffer of another dtype or shape than what was sent.

Bytes that arrive into a buffer of the wrong shape are not an error to the transport (gloo
fills a larger buffer's head silently, and aborts on a smaller one): the contract is what says
so, in the schedule's words, at the receive's stage and step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Sequence

import numpy as np

from explorer.errors import InputError
from explorer.failure import Failure, FailureKind
from explorer.pipeline.analysis.exchanges import exchanges
from explorer.pipeline.analysis.p2p import fifo_pairs, match
from explorer.pipeline.schedules.instructions import Instruction, Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.messages import parse_tensor
from explorer.pipeline.traces.result import PipelineRunResult

Pairing = Literal["tagged", "peer"]
ContractKind = Literal["swap", "count", "reuse", "dtype", "shape"]

_HINTS: dict[str, str] = {
    "swap": "tag each direction (or give it its own communicator), or post the exchanges with "
    "that peer in the same order on both ranks",
    "count": "send the same tuple every micro-batch; a floating tensor that needs no gradient "
    "must not require one on either side",
    "count-grad": "the receiver made a floating tensor that needs no gradient require one "
    "(DeepSpeed does so for every floating tensor it receives): pass it as an integer or bool "
    "tensor, or detach it where the next stage uses it",
    "reuse": "the pooled buffer keeps the first message's shape: keep shapes fixed (pad) or "
    "re-read them per message (DeepSpeed: dynamic_shape=True)",
    "reuse-dtype": "the pool reuses a buffer by size alone, whatever its dtype (DeepSpeed's "
    "_allocate_or_extend_buffers): put the floating tensors first in the stage tuple, or give "
    "the tuple one dtype",
    "dtype": "cast at the stage boundary so both sides agree on the dtype",
    "shape": "the receiver sizes its buffer once: keep shapes fixed (pad) or exchange them "
    "per message (DeepSpeed: dynamic_shape=True)",
}
_WHAT = {
    Kind.SEND_ACTIVATION: "activation",
    Kind.RECV_ACTIVATION: "activation",
    Kind.SEND_GRAD: "gradient",
    Kind.RECV_GRAD: "gradient",
}


@dataclass(frozen=True)
class ContractViolation:
    """One message that does not match its pair, at the receive's stage and step."""

    kind: ContractKind
    iteration: int
    stage: int  # the receiving stage
    step: int  # the receive's step
    microbatch: int
    instruction: str  # the receive, DeepSpeed's repr
    send_stage: int
    send_step: int
    sent: tuple[str, ...]  # the sender's tuple (encoded), () when its line is missing
    received: tuple[str, ...]  # the receive buffer's tuple, () when its line is missing
    index: Optional[int]  # the tuple element at fault, None for the whole message
    reused_from: Optional[tuple[int, int]]  # (iteration, step) that allocated a pooled buffer
    message: str
    hint: str

    def to_dict(self) -> dict:
        doc = {k: getattr(self, k) for k in self.__dataclass_fields__}
        doc["sent"], doc["received"] = list(self.sent), list(self.received)
        doc["reused_from"] = list(self.reused_from) if self.reused_from else None
        return doc


def pairs(schedule: Schedule, pairing: Pairing = "tagged") -> list[tuple[int, int]]:
    """(send row, receive row) of every exchange that meets, under ``pairing``."""
    if pairing == "tagged":
        partner = match(schedule).partner
        sends = exchanges(schedule).sends
        sends = sends[partner[sends] >= 0]
        return list(zip(sends.tolist(), partner[sends].tolist()))
    facts = exchanges(schedule)
    s2r = np.asarray(schedule.stage_to_rank, dtype=np.int64)
    last = schedule.num_stages - 1

    def channels(rows: np.ndarray, sending: bool) -> tuple[np.ndarray, np.ndarray]:
        kind, stage = schedule.kind[rows], schedule.stage.astype(np.int64)[rows]
        up = (kind == Kind.SEND_ACTIVATION) | (kind == Kind.RECV_GRAD)
        peer = np.where(up, stage + 1, stage - 1)
        ok = (peer >= 0) & (peer <= last)
        rows, kind, stage, peer = rows[ok], kind[ok], stage[ok], peer[ok]
        me, other = schedule.rank.astype(np.int64)[rows], s2r[peer]
        src, dst = (me, other) if sending else (other, me)
        sender = stage if sending else peer
        grad = (kind == Kind.SEND_GRAD) | (kind == Kind.RECV_GRAD)
        local = 2 * sender + grad  # same rank: the stage's own queue, as tagged
        offset = 2 * schedule.num_stages
        chan = np.where(src == dst, local, offset + src * schedule.num_ranks + dst)
        return rows, chan

    s_rows, s_chan = channels(facts.sends, True)
    r_rows, r_chan = channels(facts.recvs, False)
    send, recv = fifo_pairs(s_rows, s_chan, r_rows, r_chan)
    return list(zip(send.tolist(), recv.tolist()))


def check_contract(
    schedule: Schedule, records: Sequence[dict], pairing: Pairing = "tagged"
) -> list[ContractViolation]:
    """Every violation in ``records`` (instr lines with ``p2p`` fields), first one first."""
    lines = {(r["iteration"], r["stage"], r["step"], r["text"]): r for r in records if "p2p" in r}
    iterations = sorted({key[0] for key in lines})
    activations = {
        (key[0], ins.stage, ins.microbatch): lines[key]
        for row in exchanges(schedule).sends.tolist()
        if (ins := schedule.instruction(row)).kind == Kind.SEND_ACTIVATION
        for key in [(it, ins.stage, int(schedule.step[row]), str(ins)) for it in iterations]
        if key in lines
    }
    out: list[ContractViolation] = []
    for send_row, recv_row in pairs(schedule, pairing):
        send, recv = schedule.instruction(send_row), schedule.instruction(recv_row)
        s_step, r_step = int(schedule.step[send_row]), int(schedule.step[recv_row])
        for it in iterations:
            sent = lines.get((it, send.stage, s_step, str(send)))
            got = lines.get((it, recv.stage, r_step, str(recv)))
            found = _compare(send, s_step, sent, recv, r_step, got, it, schedule)
            if found is None and sent is not None and got is not None:
                found = _gradient_count(send, s_step, sent, recv, r_step, got, it, activations)
            if found is not None:
                out.append(found)
    return sorted(out, key=lambda v: (v.iteration, min(v.step, v.send_step), v.stage))


def _compare(
    send: Instruction,
    s_step: int,
    sent_line: Optional[dict],
    recv: Instruction,
    r_step: int,
    recv_line: Optional[dict],
    iteration: int,
    schedule: Schedule,
) -> Optional[ContractViolation]:
    """The first violation of one pair in one iteration, or None."""
    sent = tuple(sent_line["p2p"]) if sent_line else ()
    got = tuple(recv_line["p2p"]) if recv_line else ()
    reused = recv_line.get("reused") if recv_line else None
    reused_from = (int(reused[0]), int(reused[1])) if reused else None

    def violation(
        kind: ContractKind, index: Optional[int], words: str, hint: str = ""
    ) -> ContractViolation:
        return ContractViolation(
            kind, iteration, recv.stage, r_step, recv.microbatch, recv.deepspeed_repr(),
            send.stage, s_step, sent, got, index, reused_from, words, _HINTS[hint or kind],
        )  # fmt: skip

    dest = send.stage + 1 if send.kind == Kind.SEND_ACTIVATION else send.stage - 1
    if dest != recv.stage or _WHAT[send.kind] != _WHAT[recv.kind]:
        if not (sent_line or recv_line):
            return None  # no line of this iteration recorded either side
        peer = schedule.stage_to_rank[recv.stage]
        src = schedule.stage_to_rank[send.stage]
        return violation(
            "swap",
            None,
            f"stage {send.stage} -> {dest}, micro-batch {send.microbatch}: its {_WHAT[send.kind]} "
            f"({_tuple(sent)}, step {s_step}) met stage {recv.stage}'s {recv.deepspeed_repr()} of "
            f"micro-batch {recv.microbatch} at step {r_step}, which waits for stage "
            f"{_source_stage(recv)}'s {_WHAT[recv.kind]} ({_tuple(got)}): ranks {src} and "
            f"{peer} are each other's next and previous rank and untagged messages pair first in, "
            "first out",
        )
    if sent_line is None or recv_line is None:
        return None
    where = f"stage {send.stage} -> {recv.stage}, micro-batch {recv.microbatch}"
    if len(sent) != len(got):
        return violation(
            "count",
            None,
            f"{where}: sent a tuple of {len(sent)} ({_tuple(sent)}); the receive expects "
            f"{len(got)} ({_tuple(got)})",
        )
    for i, (a, b) in enumerate(zip(sent, got)):
        x, y = parse_tensor(a), parse_tensor(b)
        if x.dtype == y.dtype and x.shape == y.shape:
            continue
        kind: ContractKind = "reuse" if reused_from else "dtype" if x.dtype != y.dtype else "shape"
        origin = (
            f", reused from the {_received_at(schedule, recv.stage, reused_from[1], recv)} "
            f"received at step {reused_from[1]}"
            + (f" of iteration {reused_from[0]}" if reused_from[0] != iteration else "")
            if reused_from
            else ""
        )
        hint = "reuse-dtype" if kind == "reuse" and x.dtype != y.dtype else ""
        return violation(
            kind, i, f"{where}, tuple[{i}]: sent {x}; the receive buffer is {y}{origin}", hint
        )
    return None


def _gradient_count(
    send: Instruction,
    s_step: int,
    sent_line: dict,
    recv: Instruction,
    r_step: int,
    recv_line: dict,
    iteration: int,
    activations: dict,
) -> Optional[ContractViolation]:
    """A gradient tuple whose length is not the number of forward elements that require one."""
    if send.kind != Kind.SEND_GRAD:
        return None
    forward = activations.get((iteration, recv.stage, send.microbatch))
    if forward is None:
        return None
    needing = [x for x in forward["p2p"] if x.endswith("*")]
    grads = sent_line["p2p"]
    if len(grads) == len(needing):
        return None
    reused = recv_line.get("reused")
    return ContractViolation(
        "count", iteration, recv.stage, r_step, recv.microbatch, recv.deepspeed_repr(),
        send.stage, s_step, tuple(grads), tuple(recv_line["p2p"]), None,
        (int(reused[0]), int(reused[1])) if reused else None,
        f"stage {send.stage} -> {recv.stage}, micro-batch {send.microbatch}: sent {len(grads)} "
        f"gradient(s) ({_tuple(grads)}) for a forward tuple with {len(needing)} element(s) "
        f"requiring one ({', '.join(forward['p2p'])}; * marks them), sent by stage {recv.stage} "
        f"at step {forward['step']}",
        _HINTS["count-grad"],
    )  # fmt: skip


def _received_at(schedule: Schedule, stage: int, step: int, default: Instruction) -> str:
    """What the receive of ``stage`` at ``step`` received: activation or gradient."""
    rank = schedule.stage_to_rank[stage]
    stream = schedule.stream(rank)
    row = stream[step] if 0 <= step < len(stream) else []
    found = [i for i in row if i.stage == stage and i.kind.is_recv] or [default]
    return _WHAT[found[0].kind]


def _source_stage(recv: Instruction) -> int:
    """The stage a receive waits for."""
    return recv.stage - 1 if recv.kind == Kind.RECV_ACTIVATION else recv.stage + 1


def _tuple(items: Sequence[str]) -> str:
    return ", ".join(str(parse_tensor(x)) for x in items) if items else "not recorded"


def describe(violation: ContractViolation) -> str:
    """One line: where, what, and the fix when the cause is known."""
    return (
        f"P2P contract ({violation.kind}) at stage {violation.stage} step {violation.step} "
        f"({violation.instruction}): {violation.message}; fix: {violation.hint}"
    )


def judged(
    result: PipelineRunResult, schedule: Schedule, pairing: Pairing = "tagged"
) -> PipelineRunResult:
    """``result`` with its contract checked: ``details["contract"]`` lists every violation, and
    the first one becomes the run's failure (the cause: what failed after it, a shape error in
    the next forward, a peer that died, follows as "then").
    """
    found = check_contract(schedule, result.records, pairing)
    result.details["contract"] = [v.to_dict() for v in found]
    if not found:
        return result
    result.failure = failure_of(found[0], schedule, result.failure)
    result.ok = False
    return result


def failure_of(
    first: ContractViolation, schedule: Schedule, before: Optional[Failure] = None
) -> Failure:
    """The run's failure for its first violation; what failed after it (``before``: a shape
    error in the next forward, a peer that died) follows as "then"."""
    then = f" (then: {before.message})" if before is not None else ""
    return Failure(
        FailureKind.CONTRACT,
        describe(first) + then,
        rank=schedule.stage_to_rank[first.stage],
        stage=first.stage,
        step=first.step,
        instruction=first.instruction,
        consequences=before.consequences if before is not None else (),
    )


def message_steps(
    schedule: Schedule, rank: int
) -> dict[tuple[int, Kind, int], tuple[int, Instruction]]:
    """Each exchange of ``rank`` by (stage, kind, micro-batch): its step and instruction.

    An engine that labels its messages in its own words (PyTorch's runtime: ``1SEND_F3``)
    writes them at the step the schedule gives them, so :func:`check_contract` pairs its lines
    as it pairs the explorer's own.
    """
    return {
        (ins.stage, ins.kind, ins.microbatch): (step, ins)
        for step, group in enumerate(schedule.stream(rank))
        for ins in group
        if ins.kind.is_p2p
    }


def exchange_places(schedule: Schedule) -> set[tuple[int, int, str]]:
    """(stage, step, text) of every send and receive: where a line describes a message."""
    return {
        (ins.stage, int(schedule.step[row]), str(ins))
        for row in range(len(schedule.kind))
        if (ins := schedule.instruction(row)).kind.is_p2p
    }


@dataclass(frozen=True)
class ContractReport:
    """The contract of a recorded run (``explorer check RUN_FOLDER``): what wrote it, how many
    messages its lines describe, and every violation, first one first."""

    source: str
    schedule: Schedule
    exchanges: int  # send and receive lines read
    violations: list[ContractViolation]
    #: How the run itself ended, when it failed for another cause (a buffer fault, an error, a
    #: rank killed): every message may match and the run still not be ok, as ``explorer read``
    #: of the same folder says.
    run_failure: Optional[Failure] = None
    #: The run finished, every message matched, and what it computed is still wrong (its losses
    #: and gradients against the reference), in one sentence; "" when right or not known.
    wrong_result: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations and self.run_failure is None and not self.wrong_result

    def failure(self) -> Optional[Failure]:
        """The first violation as the run's failure, else the run's own failure (None: neither)."""
        return (
            failure_of(self.violations[0], self.schedule) if self.violations else self.run_failure
        )

    def to_dict(self) -> dict:
        failure = self.failure()
        return {
            "source": self.source,
            "ok": self.ok,
            "exchanges": self.exchanges,
            "contract": [v.to_dict() for v in self.violations],
            "failure": failure.to_dict() if failure else None,
            "wrong_result": self.wrong_result or None,
        }

    def describe(self) -> list[str]:
        """The report's lines: a verdict, then each violation in one line."""
        if not self.violations:
            kept = (
                f"P2P contract of {self.source}: {self.exchanges} send and receive line(s), every "
                "message matches the receive it met"
            )
            if self.wrong_result:
                return [kept, f"but the run's result is wrong: {self.wrong_result}"]
            if self.run_failure is None:
                return [kept]
            ended = self.run_failure
            where = f"{ended.where()}: " if ended.where() else ""
            # a run that failed may not have recorded all its messages (a rank killed before
            # its sends): the verdict is about the lines there are, and says so
            recorded = (
                f"P2P contract of {self.source}: each message of the {self.exchanges} send and "
                "receive line(s) the run recorded matches the receive it met"
            )
            if ended.kind == FailureKind.RUNNING:  # read while it runs: no verdict on it yet
                return [recorded, f"but the run has not ended: {ended.message}"]
            return [recorded, f"but the run failed of another cause: {where}{ended.message}"]
        return [
            f"P2P contract of {self.source}: {len(self.violations)} message(s) of "
            f"{self.exchanges} send and receive line(s) do not match the receive they met, "
            "first one first:"
        ] + [f"  {describe(v)}" for v in self.violations]


def contract_report(
    source: str, schedule: Schedule, records: Sequence[dict], pairing: Pairing = "tagged"
) -> ContractReport:
    """The contract of ``records`` (every line of a recorded run), after checking that each of
    their exchanges describes its tuple: a run whose exchange lines carry no ``p2p`` at all, or
    only some of them, cannot be checked, and says so (InputError) instead of passing."""
    places = exchange_places(schedule)
    exchanges = [r for r in records if (r.get("stage"), r.get("step"), r.get("text")) in places]
    bare = [r for r in exchanges if "p2p" not in r]
    if bare and len(bare) == len(exchanges):
        raise InputError(
            f"{source}: its {len(bare)} send and receive line(s) carry no p2p tuple (written "
            "before messages were recorded?); run it again to check what travels"
        )
    if bare:
        r = bare[0]
        raise InputError(
            f"{source}: {len(bare)} of {len(exchanges)} send and receive line(s) carry no p2p "
            f"tuple, the first rank {r.get('rank')}'s {r['text']} at iteration "
            f"{r.get('iteration')} step {r['step']}: partial metadata, was the file edited?"
        )
    return ContractReport(
        source, schedule, len(exchanges), check_contract(schedule, records, pairing)
    )


def pairing_of(spec_tags: bool) -> Pairing:
    """The pairing rule of a run: tagged channels, or one untagged channel per rank pair."""
    return "tagged" if spec_tags else "peer"


__all__ = [
    "ContractReport",
    "ContractViolation",
    "contract_report",
    "Pairing",
    "check_contract",
    "describe",
    "exchange_places",
    "failure_of",
    "judged",
    "message_steps",
    "pairing_of",
    "pairs",
]
