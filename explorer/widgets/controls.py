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

from explorer.analysis import Costs, build
from explorer.analysis.rules import apply_rules, parse_rules
from explorer.schedules import KINDS, Schedule
from explorer.schedules.generators import ScheduleKind
from explorer.schedules.generators.deepspeed import ExchangeOrder

BUFFER_POLICIES = ("default", "minimal", "legacy", "fixed")
ORDERS = ("default", "legacy", "fixed")
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
    #: Rewrite rules applied after building (:mod:`explorer.analysis.rules`), e.g. a fix the search found.
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
            costs=Costs(**{name: float(box.value) for name, box in self.costs.items()}),
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


def _policy(buffers: Union[None, str, int]) -> str:
    if buffers is None:
        return "default"
    if buffers in BUFFER_POLICIES:
        return str(buffers)
    raise ValueError(
        f"the explorer's buffer control offers {', '.join(BUFFER_POLICIES)}; got {buffers!r}"
    )


__all__ = ["BUFFER_POLICIES", "ORDERS", "COST_FIELDS", "ScheduleSettings", "Controls"]
