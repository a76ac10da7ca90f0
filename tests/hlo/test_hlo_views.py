"""The diff figures, inspected through ``to_dict()`` rather than looked at."""

from __future__ import annotations

from explorer.xla.hlo import diff_modules
from explorer.xla.views.hlo import changed_region, diff_rows, diff_table, report_html


def test_table_has_one_row_per_difference(load):
    mods = load("added_save.hlo.txt")
    a, b = mods[1], mods[3]
    d = diff_modules(a, b)
    rows = diff_rows(d, a, b)
    kinds = [r[0] for r in rows]
    assert kinds.count("added") == len(d.added) and kinds.count("changed") == len(d.changed)
    cells = diff_table(d, a, b).to_dict()["data"][0]["cells"]["values"]
    assert cells[0] == kinds and any("aten__stack" in o for o in cells[3])


def test_table_is_capped(load):
    a, b = load("encoder_step1.hlo.txt.gz")[0], load("encoder_step2.hlo.txt.gz")[0]
    d = diff_modules(a, b)
    rows = diff_rows(d, a, b, limit=10)
    assert len(rows) == 11 and rows[-1][0] == "..."


def test_region_shows_added_and_context_nodes(load):
    mods = load("added_save.hlo.txt")
    d = diff_modules(mods[1], mods[3])
    fig = changed_region(d, mods[1], mods[3], max_nodes=20).to_dict()
    names = {t["name"] for t in fig["data"]}
    assert "added (in IrToHlo.141)" in names and "context (in IrToHlo.141)" in names
    added = next(t for t in fig["data"] if t["name"].startswith("added"))
    assert len(added["x"]) == min(20, sum(g.count for g in d.added))


def test_region_lists_removed_nodes(load):
    a, b = load("scalar_save.hlo.txt")
    d = diff_modules(a, b)
    fig = changed_region(d, a, b).to_dict()
    removed = [t for t in fig["data"] if t["name"].startswith("removed")]
    assert removed and removed[0]["text"] == ["parameter"]


def test_report_is_offline_html(load):
    (a,), (b,) = load("order_a.hlo.txt"), load("order_b.hlo.txt")
    d = diff_modules(a, b)
    page = report_html(d, a, b)
    assert page.startswith("<!DOCTYPE html>") and "moved to another position" in page
    assert '<script src="http' not in page and "Plotly.newPlot" in page  # plotly.js inlined


def _empty_columns(table: dict) -> list[str]:
    headers, columns = table["header"]["values"], table["cells"]["values"]
    out = [f"column {i} has an empty header" for i, h in enumerate(headers) if not str(h).strip()]
    return out + [
        f"column {i} ({headers[i]!r}) has no text"
        for i, col in enumerate(columns)
        if not any(str(v).strip() for v in col)
    ]


def test_table_fills_every_header_and_column(load):
    """Issue 10: a column without text (e.g. 'in A' when B only adds) read as a table that failed to draw."""
    mods = load("added_save.hlo.txt")
    a, b = mods[1], mods[3]
    table = diff_table(diff_modules(a, b), a, b).to_dict()["data"][0]
    assert _empty_columns(table) == []
    assert "width" not in diff_table(diff_modules(a, b), a, b).to_dict()["layout"]


def test_table_of_identical_modules_says_so(load):
    (a,) = load("order_a.hlo.txt")
    table = diff_table(diff_modules(a, a), a, a).to_dict()["data"][0]
    assert _empty_columns(table) == [] and table["cells"]["values"][0] == ["none"]
