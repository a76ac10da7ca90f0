"""A self-contained HTML page for a checked schedule: the grid, the findings, the numbers.

Plain HTML and CSS only - it opens anywhere with no network and needs no plotly. The plotly
views (the views/widgets layer) are richer; this page is what ``explorer schedule --format
html`` writes for CI artifacts and issue attachments.
"""

from __future__ import annotations

import html

from explorer.analysis.check import Report
from explorer.printout.listing import findings_by_cell, summary

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


def schedule_page(report: Report) -> str:
    s = report.schedule
    cells = findings_by_cell(report)
    head = "".join(f"<th>rank {r}</th>" for r in range(s.num_ranks))
    streams = s.streams()
    rows = []
    for t in range(s.num_steps):
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
    findings = "".join(
        f"<li class='bad-text'>{html.escape(f.describe())}</li>" for f in report.findings.all()
    )
    title = f"{s.name}: {s.num_stages} stages, {s.num_microbatches} micro-batches"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<pre>{html.escape(summary(report))}</pre>"
        f"<h2>Findings</h2><ul>{findings or '<li>none</li>'}</ul>"
        f"<h2>Instruction grid</h2><table><tr><th></th>{head}</tr>{''.join(rows)}</table>"
        "</body></html>\n"
    )


__all__ = ["schedule_page"]
