"""A self-contained HTML page for a checked schedule: the numbers, the findings, the figures and
the instruction table.

Plain HTML and CSS here - this layer imports no plotly. The figures (grid, timeline, lifetimes,
memory) come in as ready ``<div>`` fragments from the views layer, plotly.js inlined once in the
first, so the page still opens anywhere with no network. This page is what ``explorer schedule
--format html`` writes for CI artifacts and issue attachments. Its size is bounded: the table
lists the first ``MAX_TABLE_STEPS`` steps and the findings list the first ``MAX_FINDINGS`` (the
text listing and ``explorer check --json`` carry all of them).
"""

from __future__ import annotations

import html
from typing import Sequence

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.printout.listing import findings_by_cell, summary

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222}
table{border-collapse:collapse;font:12px ui-monospace,monospace}
td,th{border:1px solid #ddd;padding:2px 4px;vertical-align:top;white-space:nowrap}
th{background:#f4f4f4;position:sticky;top:0}
td.bad{outline:2px solid #d00;background:#fee}
.F{color:#1f5fbf}.B,.I{color:#2a8a2a}.W{color:#7a4fbf}
.bad-text{color:#b00020}
pre{background:#f7f7f7;padding:.6em}
"""


#: Steps listed in the instruction table: enough to read a schedule's start, warm-up and steady
#: state; a 64 x 1024 schedule's 2,000+ steps over 64 ranks would be 14 MB of table.
MAX_TABLE_STEPS = 128
#: Findings listed one a line (the rest are counted).
MAX_FINDINGS = 200


def schedule_page(report: Report, figures: Sequence[tuple[str, str]] = ()) -> str:
    """The page; ``figures`` are ``(heading, html div)`` pairs, shown before the table."""
    s = report.schedule
    cells = findings_by_cell(report)
    head = "".join(f"<th>rank {r}</th>" for r in range(s.num_ranks))
    streams = s.streams()
    rows = []
    shown_steps = min(s.num_steps, MAX_TABLE_STEPS)
    for t in range(shown_steps):
        tds = []
        for r in range(s.num_ranks):
            toks = " ".join(
                f"<span class='{i.kind.code}'>{html.escape(str(i))}</span>" for i in streams[r][t]
            )
            marks = cells.get((r, t))
            if marks:
                tip = html.escape(" | ".join(marks), quote=True)
                tds.append(f"<td class='bad' title='{tip}'>{toks} &#9888;</td>")
            else:
                tds.append(f"<td>{toks}</td>")
        rows.append(f"<tr><th>step {t}</th>{''.join(tds)}</tr>")
    found = report.findings.all()
    findings = "".join(
        f"<li class='bad-text'>{html.escape(f.describe())}</li>" for f in found[:MAX_FINDINGS]
    )
    if len(found) > MAX_FINDINGS:
        findings += f"<li>… and {len(found) - MAX_FINDINGS:,} more (explorer check --json lists them all)</li>"
    cut = (
        f"<p>Steps {shown_steps}–{s.num_steps - 1} are not listed here: "
        "<code>explorer schedule --format text</code> lists every step.</p>"
        if shown_steps < s.num_steps
        else ""
    )
    figs = "".join(f"<h2>{html.escape(name)}</h2>{div}" for name, div in figures)
    title = f"{s.name}: {s.num_stages} stages, {s.num_microbatches} micro-batches"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<pre>{html.escape(summary(report))}</pre>"
        f"<h2>Findings</h2><ul>{findings or '<li>none</li>'}</ul>"
        f"{figs}"
        f"<h2>Instruction table</h2><table><tr><th></th>{head}</tr>{''.join(rows)}</table>{cut}"
        "</body></html>\n"
    )


__all__ = ["MAX_TABLE_STEPS", "MAX_FINDINGS", "schedule_page"]
