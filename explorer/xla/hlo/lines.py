"""Parsing of single HLO lines: instruction lines and computation headers.

HLO text has one instruction per line, so the parser works line by line with compiled regular
expressions and a bracket scanner that only visits brackets, quotes and commas. That keeps a
35,000-instruction module (tens of MB when torch_xla prints every operand's tuple shape
inline) within a fraction of a second in pure Python. Every failure raises
:class:`HloParseError` with the column of the offending character.
"""

from __future__ import annotations

import re
from typing import Optional

from explorer.errors import excerpt
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.model import CALL_KEYS, NO_METADATA, HloInstruction, Metadata, strip_comments

NAME = r"[A-Za-z_][\w.\-]*"
_HEAD = re.compile(rf"\s*(ROOT\s+)?%?({NAME})\s*=\s*")
_ARRAY = re.compile(r"[a-z][a-z0-9]*\[[\d,<=?]*\](?:\{[^{}]*\})?")
# For .sub over a whole operand list: a shape never starts inside a run of letters and digits,
# and starting only where one begins keeps a 60,000-letter run linear (every start rescans it).
_ARRAY_IN_TEXT = re.compile(r"(?<![a-z0-9])[a-z][a-z0-9]*\[[\d,<=?]*\](?:\{[^{}]*\})?")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_PARENS = re.compile(r"[()]")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*("?)|[{}()\[\],]')
_ATTR_KEY = re.compile(r"\s*,\s*([A-Za-z_][\w\-]*)=")
_NAME_ONLY = re.compile(rf"%?({NAME})")
_TUPLE_REST = re.compile(r"[\s,()]*")
_PUNCT_RUN = re.compile(r"[\s,()]+")
# The plain value may not end in whitespace (the \s* after it takes that), so a value followed by
# 60,000 spaces and a bracket fails in linear time instead of re-trying every split of the spaces.
_SIMPLE_ATTR = re.compile(
    r'\s*,\s*([A-Za-z_][\w\-]*)=\s*([^,{}()\[\]"\s](?:[^,{}()\[\]"]*[^,{}()\[\]"\s])?'
    r'|\{[^{}()\[\]"]*\}|%?[\w.\-]+)\s*(?=,|$)'
)
_METADATA = re.compile(r',\s*metadata=\{((?:[^{}"]|"(?:[^"\\]|\\.)*")*)\}\s*(?=,|$)')
# Keys start where a word starts: findall would otherwise retry from inside a 60,000-digit run.
_META_FIELD = re.compile(r'(?<!\w)(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
_CALLED = re.compile(rf"%?({NAME})")
_INT = re.compile(r"\d+")
_COMP_START = re.compile(rf"(ENTRY\s+)?%?({NAME})")
#: Largest parameter number read (XLA numbers parameters from 0; no module has 2**31 of them).
MAX_PARAMETER = 2**31 - 1
#: Digits of the largest source line kept from metadata (longer ones are not line numbers).
_MAX_LINE_DIGITS = 12
_HEADER_PARAM = re.compile(
    rf"\s*(?:,\s*)?%?({NAME})\s*:\s*"
)  # not '\s*,?\s*': quadratic over spaces


def _fail(message: str, lineno: int, col: int, line: str) -> HloParseError:
    return HloParseError(message, lineno, col + 1, line.strip())


def _drop_empty_parens(text: str) -> str:
    r"""Remove ``(...)`` spans holding only spaces, commas and parentheses (what is left of tuple shapes).

    Equivalent to ``re.sub(r"\([\s,()]*\)", "", text)`` - in each run of those characters the
    span from its first ``(`` to its last ``)`` - but linear: the regex re-scans a run of
    100,000 ``(`` from every one of them.
    """

    def cut(m: re.Match) -> str:
        run = m.group()
        a, b = run.find("("), run.rfind(")")
        return run if a < 0 or b < a else run[:a] + run[b + 1 :]

    return _PUNCT_RUN.sub(cut, text)


def matching_paren(line: str, start: int, lineno: int) -> int:
    """Index of the ``)`` that closes the ``(`` at ``start``."""
    depth = 0
    for m in _PARENS.finditer(line, start):
        if m.group() == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    raise _fail("unbalanced parentheses (line truncated?)", lineno, start, line)


def read_shape(line: str, pos: int, lineno: int) -> tuple[str, int]:
    """The shape starting at ``pos`` (array, tuple, token[]) and the index after it."""
    if pos < len(line) and line[pos] == "(":
        end = matching_paren(line, pos, lineno) + 1
        text = strip_comments(line[pos:end])
        if not _TUPLE_REST.fullmatch(_ARRAY_IN_TEXT.sub("", text)):
            raise _fail("malformed tuple shape", lineno, pos, line)
        return text, end
    m = _ARRAY.match(line, pos)
    if not m:
        raise _fail(
            "expected a shape such as f32[2,3]{1,0}, (f32[], s32[]) or token[]", lineno, pos, line
        )
    return m.group(), m.end()


def _operands(text: str, lineno: int, col: int, line: str) -> tuple[str, ...]:
    """Operand names from ``f32[2]{0} %a, (f32[], f32[]) %t`` or bare ``a, t``."""
    text = strip_comments(text)
    if not text.strip():
        return ()
    if "[" in text:
        text = _drop_empty_parens(_ARRAY_IN_TEXT.sub("", text))
    names = []
    for item in text.split(","):
        m = _NAME_ONLY.fullmatch(item.strip())
        if not m:
            raise _fail(f"malformed operand {excerpt(item.strip())}", lineno, col, line)
        names.append(m.group(1))
    return tuple(names)


def _split_attrs(line: str, pos: int, lineno: int) -> list[tuple[str, str]]:
    """``, key=value`` pairs after the operand list; values may nest brackets and strings."""
    attrs = []
    n = len(line)
    while pos < n:
        fast = _SIMPLE_ATTR.match(line, pos)
        if fast:
            attrs.append((fast.group(1), fast.group(2).strip()))
            pos = fast.end()
            continue
        if line[pos:].isspace():
            break
        m = _ATTR_KEY.match(line, pos)
        if not m:
            raise _fail("expected ', key=value' after the operands", lineno, pos, line)
        key, start = m.group(1), m.end()
        depth, end = 0, n
        for t in _BRACKETS.finditer(line, start):
            tok = t.group()
            if tok[0] == '"':
                if not t.group(1):
                    raise _fail("unterminated string", lineno, t.start(), line)
            elif tok in "{([":
                depth += 1
            elif tok in "})]":
                depth -= 1
                if depth < 0:
                    raise _fail("unbalanced brackets in attribute", lineno, t.start(), line)
            elif depth == 0:
                end = t.start()
                break
        if depth != 0:
            raise _fail(f"unbalanced brackets in attribute {key!r}", lineno, start, line)
        value = line[start:end].strip()
        if not value:
            raise _fail(f"attribute {key!r} has no value", lineno, start, line)
        attrs.append((key, value))
        pos = end
    return attrs


_META_CACHE: dict[str, Metadata] = {}


def _metadata(value: str) -> Metadata:
    """Metadata fields; many instructions share one text, so results are cached."""
    hit = _META_CACHE.get(value)
    if hit is not None:
        return hit
    if len(_META_CACHE) > 100_000:
        _META_CACHE.clear()
    fields = dict(_META_FIELD.findall(value))
    line = fields.get("source_line", "")
    meta = Metadata(
        op_type=fields.get("op_type", "").strip('"'),
        op_name=fields.get("op_name", "").strip('"'),
        source_file=fields.get("source_file", "").strip('"'),
        # isdigit() also accepts superscripts such as '¹', which int() rejects (found by the fuzzer).
        # More than 12 digits is no line number (and int() refuses more than 4,300 digits).
        source_line=int(line)
        if line.isascii() and line.isdigit() and len(line) <= _MAX_LINE_DIGITS
        else None,
    )
    _META_CACHE[value] = meta
    return meta


# The common line, read by one regular expression: an array shape, no nested parentheses in the
# operand list. Anything else (tuples, comments, odd spacing, errors) takes the careful path below,
# which accepts the same language and names the column of a mistake. The two usual operand lists,
# a dump's ``%a, %b`` (group ``names``) and torch_xla's ``f32[2]{0} %a, f32[] %b`` (group
# ``shaped``), are recognised by the same pass, so they need no second regex to check them.


def fast_line_pattern(also_not: str = "") -> str:
    """The common line's regular expression, groups (root, name, shape, opcode, inner, names,
    shaped, rest). ``also_not`` adds characters the negated classes refuse: a scan of a whole
    body passes ``"\\n"`` so no match crosses a line, which leaves the language of one line
    (which has no newline) unchanged."""
    arr = rf"[a-z][a-z0-9]*\[[\d,<=?]*\](?:\{{[^{{}}(){also_not}]*\}})?"
    return (
        rf"[ \t]*(ROOT[ \t]+)?%?({NAME})[ \t]*=[ \t]*({arr})[ \t]+([a-z][a-z0-9\-]*)"
        rf"\(((%{NAME}(?:, %{NAME})*)|({arr} %{NAME}(?:, {arr} %{NAME})*)|[^(){also_not}]*)\)(.*)"
    )


_ARR_FAST = r"[a-z][a-z0-9]*\[[\d,<=?]*\](?:\{[^{}()]*\})?"
_FAST_LINE = re.compile(fast_line_pattern())
_FAST_OPS = re.compile(
    rf"[ \t]*(?:{_ARR_FAST}[ \t]+)?%?{NAME}(?:[ \t]*,[ \t]*(?:{_ARR_FAST}[ \t]+)?%?{NAME})*[ \t]*"
)
_FAST_OP_NAME = re.compile(rf"(?:^|,)[ \t]*(?:{_ARR_FAST}[ \t]+)?%?({NAME})")
_FAST_BARE_NAME = re.compile(NAME)
#: What the text after the operand list became: (metadata, attributes, called computations), or
#: None when only the careful path can read it. Most dumps repeat a few such tails
#: (``, dimensions={0}``) tens of thousands of times.
_REST_CACHE: dict[str, Optional[tuple[Metadata, tuple, tuple]]] = {}


def _read_rest(rest: str, lineno: int) -> Optional[tuple[Metadata, tuple, tuple]]:
    """Metadata, attributes and called computations from the text after the operands."""
    metadata = NO_METADATA
    at = rest.find(", metadata={")
    if at >= 0:
        body = rest[at + 12 : -1]
        if (
            rest[-1] == "}"
            and "{" not in body
            and "}" not in body
            and "\\" not in body
            and not body.count('"') % 2
        ):  # metadata last and plain, what _METADATA would match, without the regex
            metadata = _metadata(body)
            rest = rest[:at]
        else:
            meta = _METADATA.match(rest, at)
            if meta is None:
                return None
            metadata = _metadata(meta.group(1))
            rest = rest[: meta.start()] + rest[meta.end() :]
    if not rest:
        return metadata, (), ()
    try:
        pairs = _split_attrs(rest, 0, lineno)
    except HloParseError:
        return None
    return _sorted_attrs(pairs, metadata)


_NO_TAIL: tuple[Metadata, tuple, tuple] = (NO_METADATA, (), ())


def rest_tail(rest: str) -> Optional[tuple[Metadata, tuple, tuple]]:
    """(metadata, attributes, called computations) of the text after a common line's operand
    list, or None when only the careful path can read it; read once per distinct text."""
    if not rest:
        return _NO_TAIL
    tail = _REST_CACHE.get(rest)
    if tail is None:
        tail = _read_rest(rest, 0)  # the line number only reaches an error, which is caught
        if tail is None:
            return None
        if len(_REST_CACHE) > 100_000:
            _REST_CACHE.clear()
        _REST_CACHE[rest] = tail
    return tail


_CAREFUL_TAILS: dict[str, Optional[tuple[Metadata, tuple, tuple]]] = {}


def careful_tail(rest: str) -> Optional[tuple[Metadata, tuple, tuple]]:
    """(metadata, attributes, called computations) of the text after a line's operand list as
    the careful parser reads it, or None where it refuses it; read once per distinct text.

    The careful parser reads what follows the closing parenthesis of the operand list without
    looking back at what came before it, so a line made of a plain head and this text gives
    the same tail as the original line.
    """
    if rest in _CAREFUL_TAILS:
        return _CAREFUL_TAILS[rest]
    try:
        inst = _parse_careful("%x = f32[] x()" + rest, 0)
        tail: Optional[tuple[Metadata, tuple, tuple]] = (inst.metadata, inst.attrs, inst.called)
    except HloParseError:
        tail = None
    if len(_CAREFUL_TAILS) > 100_000:
        _CAREFUL_TAILS.clear()
    _CAREFUL_TAILS[rest] = tail
    return tail


def fast_literal(opcode: str, inner: str) -> Optional[tuple[str, Optional[int]]]:
    """A constant's literal or a parameter's number as the fast path reads them (literal,
    number), or None when only the careful path may (an empty literal, a comment, odd digits)."""
    if opcode == "constant":
        literal = " ".join(inner.split())
        if not literal or "/*" in literal:
            return None
        return literal, None
    if not inner.isdigit() or not inner.isascii() or len(inner) > 10:
        return None
    number = int(inner)
    if number > MAX_PARAMETER:
        return None
    return str(number), number


def parse_common_instruction(line: str, lineno: int) -> Optional[HloInstruction]:
    """The common instruction line in one regex pass, or None to take the careful path."""
    m = _FAST_LINE.fullmatch(line)
    if m is None:
        return None
    root, name, shape, opcode, inner, names, shaped, rest = m.groups()
    literal, operands, number = "", (), None
    if opcode == "constant" or opcode == "parameter":
        read = fast_literal(opcode, inner)
        if read is None:
            return None
        literal, number = read
    elif names is not None:
        operands = tuple(names[1:].split(", %"))
    elif shaped is not None:
        operands = tuple(_FAST_OP_NAME.findall(shaped))
    elif inner:
        if not _FAST_OPS.fullmatch(inner):
            return None
        operands = tuple(
            _FAST_BARE_NAME.findall(inner) if "[" not in inner else _FAST_OP_NAME.findall(inner)
        )
    tail = rest_tail(rest)
    if tail is None:
        return None
    metadata, attrs, called = tail
    return HloInstruction(
        name,
        shape,
        opcode,
        operands,
        attrs,
        literal,
        metadata,
        lineno,
        root is not None,
        number,
        called,
    )


def parse_hlo_line(line: str, lineno: int) -> HloInstruction:
    """One instruction line: ``[ROOT] %name = shape opcode(operands), attr=value, ...``."""
    return parse_common_instruction(line, lineno) or _parse_careful(line, lineno)


def _parse_careful(line: str, lineno: int) -> HloInstruction:
    """The full grammar, bracket by bracket, with the column of the first mistake."""
    m = _HEAD.match(line)
    if not m:
        raise _fail("expected an instruction '%name = shape opcode(...)'", lineno, 0, line)
    shape, pos = read_shape(line, m.end(), lineno)
    op = _OPCODE.match(line, pos)
    if not op:
        raise _fail("expected an opcode followed by '('", lineno, pos, line)
    opcode, open_at = op.group(1), op.end() - 1
    close = matching_paren(line, open_at, lineno)
    inner = line[open_at + 1 : close]
    literal, operands, number = "", (), None
    if opcode == "constant":
        literal = " ".join(inner.split())
        if not literal:
            raise _fail("constant without a literal", lineno, open_at, line)
    elif opcode == "parameter":
        digits = inner.strip()
        if not _INT.fullmatch(digits):
            raise _fail("parameter number must be a non-negative integer", lineno, open_at, line)
        significant = (
            digits.lstrip("0") or "0"
        )  # int() refuses more than 4,300 digits, zeros included
        if len(significant) > 10 or int(significant) > MAX_PARAMETER:
            raise _fail(
                f"parameter number {excerpt(digits, 24)} is larger than {MAX_PARAMETER:,}",
                lineno,
                open_at,
                line,
            )
        number = int(significant)
        literal = str(number)
    else:
        operands = _operands(inner, lineno, open_at + 1, line)
    metadata = NO_METADATA
    at = line.find(", metadata={", close)
    meta = _METADATA.match(line, at) if at >= 0 else None
    if meta:
        metadata = _metadata(meta.group(1))
        line = line[: meta.start()] + line[meta.end() :]
    metadata, kept, called = _sorted_attrs(_split_attrs(line, close + 1, lineno), metadata)
    return HloInstruction(
        name=m.group(2),
        shape=shape,
        opcode=opcode,
        operands=operands,
        attrs=kept,
        literal=literal,
        metadata=metadata,
        line=lineno,
        is_root=bool(m.group(1)),
        parameter_number=number,
        called=called,
    )


def _sorted_attrs(
    pairs: list[tuple[str, str]], metadata: Metadata
) -> tuple[Metadata, tuple[tuple[str, str], ...], tuple[str, ...]]:
    """An instruction's attributes without its metadata, the computations they call, its metadata.

    ``metadata`` is what was found before the split (a ``metadata={...}`` left among the pairs wins).
    """
    kept: list[tuple[str, str]] = []
    called: list[str] = []
    for key, value in pairs:
        if key == "metadata":
            metadata = _metadata(value)
            continue
        if key in CALL_KEYS:
            called.extend(_CALLED.findall(value))
        kept.append((key, value))
    return metadata, tuple(kept), tuple(called)


def parse_computation_header(
    line: str, lineno: int
) -> Optional[tuple[str, bool, list[tuple[str, str]]]]:
    """``[ENTRY] %name [(p: shape, ...) -> shape] {`` as (name, is_entry, params), else None."""
    text = line.strip()
    if not text.endswith("{"):
        return None
    m = _COMP_START.match(text)
    if not m:
        return None
    # What lies between the name and the final '{' (no regex: '(.*?)\s*\{' backtracked
    # quadratically over a header holding 60,000 spaces).
    sig = strip_comments(text[m.end() : -1].strip())
    params: list[tuple[str, str]] = []
    if sig:
        if not sig.startswith("("):
            raise _fail("expected '(params) -> shape' in the computation header", lineno, 0, line)
        close = matching_paren(sig, 0, lineno)
        pos = 1
        while pos < close:
            p = _HEADER_PARAM.match(sig, pos)
            if not p:
                raise _fail("malformed parameter in the computation header", lineno, 0, line)
            shape, pos = read_shape(sig, p.end(), lineno)
            params.append((p.group(1), shape))
        rest = sig[close + 1 :].strip()
        if not rest.startswith("->"):
            raise _fail("expected '-> shape' after the parameters", lineno, 0, line)
        rest = rest[2:].strip()
        _, end = read_shape(rest, 0, lineno)
        if rest[end:].strip():
            raise _fail("unexpected text after the result shape", lineno, 0, line)
    return m.group(2), bool(m.group(1)), params


__all__ = [
    "NAME",
    "MAX_PARAMETER",
    "matching_paren",
    "read_shape",
    "parse_hlo_line",
    "parse_common_instruction",
    "parse_computation_header",
    "fast_line_pattern",
    "fast_literal",
    "rest_tail",
    "careful_tail",
]
