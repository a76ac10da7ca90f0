"""The controls of the schedule explorer and the one object they describe.

``ScheduleSettings`` is plain data (what to build and how to cost it); ``Controls`` holds the
ipywidgets that edit it. Keeping them apart lets the app, the benchmark and the tests set a
configuration without clicking, and lets a bad combination be reported by the schedule core's
own :class:`~explorer.errors.InputError` messages instead of being silently "fixed" here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Union

import ipywidgets as w

from explorer.pipeline.analysis import Costs, build
from explorer.pipeline.analysis.rules import apply_rules, parse_rules
from explorer.pipeline.schedules import KINDS, Schedule
from explorer.pipeline.schedules.generators import ScheduleKind
from explorer.pipeline.schedules.generators.deepspeed import ExchangeOrder

BUFFER_POLICIES = ("default", "minimal", "legacy", "fixed")
#: ``legacy`` and ``fixed`` are DeepSpeed's formulas: every other kind offers only these.
OTHER_KINDS_BUFFERS = ("default", "minimal")
ORDERS = ("default", "legacy", "fixed")
#: What the order dropdown offers a kind that orders its exchanges itself (the value builds no order).
NO_ORDER = [("none", "default")]
#: Chunks a rank holds when interleaved-1f1b is chosen from another kind (1 chunk would be plain 1F1B).
INTERLEAVED_CHUNKS = 2
#: The core's messages name the CLI's options; the page names its own controls.
_CONTROL_NAMES = {
    "--microbatches": "micro-batches",
    "--stages": "stages",
    "--chunks": "chunks / rank",
    "--buffers": "buffers",
    "--order": "P2P order",
}
COST_FIELDS = ("forward", "backward", "backward_input", "backward_weight", "p2p")


@dataclass(frozen=True)
class ScheduleSettings:
    """Everything needed to build and simulate one schedule."""

    kind: ScheduleKind = "1f1b"
    stages: int = 4
    microbatches: int = 8
    chunks: int = 1
    buffers: Union[None, str, int] = None
    order: Optional[ExchangeOrder] = None
    costs: Costs = field(default_factory=Costs)
    #: Rewrite rules applied after building (:mod:`explorer.pipeline.analysis.rules`), e.g. a fix the search found.
    rules: tuple[str, ...] = ()

    def simulated_costs(self) -> Costs:
        """The costs to simulate: with interleaving, a chunk holds 1/chunks of a stage's layers, so
        its forward and backward cost that share of the per-stage costs the controls show."""
        if self.kind != "interleaved-1f1b" or self.chunks <= 1:
            return self.costs
        c, v = self.costs, float(self.chunks)
        return replace(
            c,
            forward=c.forward / v,
            backward=c.backward / v,
            backward_input=c.backward_input / v,
            backward_weight=c.backward_weight / v,
        )

    def describe(self) -> str:
        """The settings a sweep depends on, in the controls' words: every size of one schedule is
        this, at another stages x micro-batches (costs change no finding)."""
        parts = [f"buffers {_policy_word(self.buffers)}"]
        if self.kind == "deepspeed-train":
            parts.append(f"P2P order {self.order or 'default'}")
        if self.kind == "interleaved-1f1b":
            parts.insert(0, f"{self.chunks} chunks / rank")
        if self.rules:
            parts.append(f"rules {' + '.join(self.rules)}")
        return f"{self.kind} ({', '.join(parts)})"

    def shape(self) -> tuple:
        """What :meth:`describe` says, as a key: equal keys, equal verdicts at every size."""
        return (
            self.kind,
            self.chunks if self.kind == "interleaved-1f1b" else 1,
            self.buffers,
            self.order if self.kind == "deepspeed-train" else None,
            tuple(self.rules),
        )

    def build(self) -> Schedule:
        """The schedule, then its rules; ``chunks``/``order`` are only passed to the kinds that take them."""
        schedule = build(
            self.kind,
            self.stages,
            self.microbatches,
            chunks=self.chunks if self.kind == "interleaved-1f1b" else 1,
            buffers=self.buffers,
            order=self.order if self.kind == "deepspeed-train" else None,
        )
        return apply_rules(schedule, parse_rules(list(self.rules)))


class Controls:
    """One widget per setting, plus the view options (lifetimes stage, arrows)."""

    def __init__(
        self, settings: ScheduleSettings, max_stages: int = 64, max_microbatches: int = 512
    ) -> None:
        slider = dict(
            continuous_update=False,
            style={"description_width": "9em"},
            layout=w.Layout(width="24em"),
        )
        self.kind = w.Dropdown(
            options=list(KINDS), value=settings.kind, description="schedule", style=slider["style"]
        )
        self.stages = w.IntSlider(
            value=settings.stages, min=1, max=max_stages, description="stages", **slider
        )
        self.microbatches = w.IntSlider(
            value=settings.microbatches,
            min=1,
            max=max_microbatches,
            description="micro-batches",
            **slider,
        )
        self.chunks = w.IntSlider(
            value=settings.chunks, min=1, max=8, description="chunks / rank", **slider
        )
        self.buffers = w.Dropdown(
            options=list(BUFFER_POLICIES),
            value=_policy(settings.buffers),
            description="buffers",
            style=slider["style"],
        )
        self.order = w.Dropdown(
            options=list(ORDERS),
            value=settings.order or "default",
            description="P2P order",
            style=slider["style"],
        )
        self.costs = {
            name: w.BoundedFloatText(
                value=getattr(settings.costs, name),
                min=0.0,
                max=1e6,
                step=0.5,
                description=name.replace("_", " "),
                style={"description_width": "10em"},
                layout=w.Layout(width="16em"),
            )
            for name in COST_FIELDS
        }
        self.lifetimes_stage = w.Dropdown(description="lifetimes of", style=slider["style"])
        self.arrows = w.Checkbox(value=False, description="send → receive arrows", indent=False)
        self.rules: tuple[str, ...] = tuple(settings.rules)
        self.rules_label = w.HTML()
        self.clear_rules = w.Button(
            description="remove the rules", icon="times", layout=w.Layout(width="12em")
        )
        self.show_rules()
        self.adapt_to_kind(settings.kind, settings.kind)  # offer only what this kind takes
        self.set_stage_options(
            settings.stages
            if settings.kind != "interleaved-1f1b"
            else settings.stages * settings.chunks
        )
        self.update_enabled()

    @property
    def schedule_widgets(self) -> list[w.Widget]:
        """Widgets whose change means a new schedule (and a new analysis)."""
        return [
            self.kind,
            self.stages,
            self.microbatches,
            self.chunks,
            self.buffers,
            self.order,
            *self.costs.values(),
        ]

    def settings(self) -> ScheduleSettings:
        """The settings the widgets show now."""
        policy = self.buffers.value
        return ScheduleSettings(
            kind=self.kind.value,
            stages=self.stages.value,
            microbatches=self.microbatches.value,
            chunks=self.chunks.value,
            buffers=None if policy == "default" else policy,
            order=None if self.order.value == "default" else self.order.value,
            costs=Costs.of({name: float(box.value) for name, box in self.costs.items()}),
            rules=self.rules,
        )

    def show_rules(self) -> None:
        """Say which rewrite rules the schedule is built with (a fix applied from the sizes panel)."""
        self.rules_label.value = (
            f"<b>rules applied:</b> {', '.join(self.rules)} (cells they changed are outlined in purple)"
            if self.rules
            else ""
        )
        self.clear_rules.layout.display = None if self.rules else "none"

    def update_enabled(self) -> None:
        """Grey out what the chosen kind ignores, so nobody expects it to matter."""
        self.chunks.disabled = self.kind.value != "interleaved-1f1b"
        self.order.disabled = self.kind.value != "deepspeed-train"

    def adapt_to_kind(self, old: str, new: str) -> list[str]:
        """Set the options ``new`` does not take back to what it does, and say each change.

        Only deepspeed-train takes DeepSpeed's buffer formulas and a P2P order; a buffers
        dropdown left on ``fixed`` under 1F1B made every later change fail with the same error.
        Interleaving with one chunk per rank is plain 1F1B, so choosing it offers 2 chunks.
        The caller pauses its observers: the result is one rebuild, not one per control.
        """
        said = []
        buffers = BUFFER_POLICIES if new == "deepspeed-train" else OTHER_KINDS_BUFFERS
        if self.buffers.value not in buffers:
            said.append(
                f"buffers {self.buffers.value} is DeepSpeed's formula (deepspeed-train only): "
                f"buffers set to default for {new}"
            )
        value = self.buffers.value if self.buffers.value in buffers else "default"
        if tuple(o if isinstance(o, str) else o[1] for o in self.buffers.options) != buffers:
            self.buffers.options = list(buffers)
        self.buffers.value = value
        if new == "deepspeed-train":
            if old != "deepspeed-train":
                self.order.options, self.order.value = list(ORDERS), "default"
        else:
            if self.order.value != "default":
                said.append(
                    f"P2P order {self.order.value} applies to deepspeed-train only: {new} orders its exchanges itself"
                )
            self.order.options, self.order.value = NO_ORDER, "default"
        if new == "interleaved-1f1b" and old != new and self.chunks.value == 1:
            self.chunks.value = INTERLEAVED_CHUNKS
            said.append(
                f"chunks / rank set to {INTERLEAVED_CHUNKS}: with 1 chunk interleaving is plain 1F1B"
            )
        elif new != "interleaved-1f1b" and old == "interleaved-1f1b":
            self.chunks.value = 1
        self.update_enabled()
        return said

    def set_stage_options(self, num_stages: int) -> None:
        """Offer "all" and every stage of the current schedule for the lifetimes view."""
        current = self.lifetimes_stage.value
        options = [("all stages", -1)] + [(f"stage {s}", s) for s in range(num_stages)]
        self.lifetimes_stage.options = options
        self.lifetimes_stage.value = (
            current if current is not None and -1 <= current < num_stages else -1
        )

    def box(self) -> w.Widget:
        """The controls in three rows that wrap on a narrow page instead of running off its edge."""
        wrap = w.Layout(flex_flow="row wrap")
        return w.VBox(
            [
                w.HBox([self.kind, self.buffers, self.order], layout=wrap),
                w.HBox([self.stages, self.microbatches, self.chunks], layout=wrap),
                w.HBox(list(self.costs.values()), layout=wrap),
            ]
        )


def control_words(message: str) -> str:
    """``message`` with the CLI's option names (``--microbatches 8``) replaced by the controls' labels."""
    for flag, label in _CONTROL_NAMES.items():
        message = message.replace(flag, label)
    return message


def _policy_word(buffers: Union[None, str, int]) -> str:
    return "default" if buffers is None else str(buffers)


def _policy(buffers: Union[None, str, int]) -> str:
    if buffers is None:
        return "default"
    if buffers in BUFFER_POLICIES:
        return str(buffers)
    raise ValueError(
        f"the explorer's buffer control offers {', '.join(BUFFER_POLICIES)}; got {buffers!r}"
    )


__all__ = [
    "BUFFER_POLICIES",
    "OTHER_KINDS_BUFFERS",
    "ORDERS",
    "NO_ORDER",
    "INTERLEAVED_CHUNKS",
    "COST_FIELDS",
    "ScheduleSettings",
    "Controls",
    "control_words",
]
