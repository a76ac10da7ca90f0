"""The markdown a lesson's prose uses, as HTML: headings, paragraphs, lists, code, emphasis, links.

A small subset on purpose: the lessons need no tables or footnotes, and a dependency-free
renderer keeps ``explorer lesson build`` to what the core already installs. Everything is
escaped first, so a teacher's ``<`` shows as written; links are kept as plain ``href``s (a page
that opens offline must fetch nothing, and a link fetches only when clicked).
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_LIST = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")


def inline(text: str) -> str:
    """One line or paragraph of markdown as inline HTML (code spans are left as written).

    Code spans are set aside first, so emphasis may run across them (``**the `+ 1` line**``).
    """
    codes: list[str] = []

    def keep(m: re.Match) -> str:
        codes.append(f"<code>{html.escape(m[1])}</code>")
        return f"\x00{len(codes) - 1}\x00"

    s = html.escape(_CODE.sub(keep, text), quote=True)  # an href below is escaped already
    s = _LINK.sub(lambda m: f'<a href="{m[2]}">{m[1]}</a>', s)
    s = _BOLD.sub(r"<strong>\1</strong>", s)
    s = _EM.sub(r"<em>\1</em>", s)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m[1])], s)


def to_html(text: str) -> str:
    """A block of markdown (several paragraphs) as HTML."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("```"):
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines)
            )
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : end]))}</code></pre>")
            i = end + 1
        elif stripped.startswith("#"):
            level = min(len(stripped) - len(stripped.lstrip("#")) + 1, 4)
            out.append(f"<h{level}>{inline(stripped.lstrip('#').strip())}</h{level}>")
            i += 1
        elif _LIST.match(line):
            ordered = stripped[0].isdigit()
            items: list[str] = []
            while i < len(lines) and lines[i].strip():
                if _LIST.match(lines[i]):
                    items.append(_LIST.sub("", lines[i]).strip())
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>{''.join(f'<li>{inline(t)}</li>' for t in items)}</{tag}>")
        else:
            para: list[str] = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{inline(' '.join(para))}</p>")
    return "\n".join(out)


def _starts_block(line: str) -> bool:
    s = line.strip()
    return s.startswith(("#", "```")) or bool(_LIST.match(line))


__all__ = ["inline", "to_html"]
