"""Bad HLO files, shared by ``explorer hlo-list`` and ``explorer hlo-diff`` (``{d}`` is the fixture folder)."""

from __future__ import annotations

from .contract import Case

#: (id, file, needle): each file alone is bad input for any HLO command.
BAD_FILES = [
    ("missing", "{d}/no_such.hlo", "no such file"),
    ("missing-folder", "{d}/no/such/folder.hlo", "no such file"),
    ("directory", "{d}/empty_dir", "is a directory"),
    ("dev-zero", "/dev/zero", "device"),
    ("dev-null", "/dev/null", "device"),
    ("fifo", "{d}/fifo", "FIFO"),
    ("over-size-limit", "{d}/huge.hlo", "MiB limit"),
    ("empty", "{d}/empty.hlo", "no 'HloModule' line"),
    ("not-hlo", "{d}/not_hlo.hlo", "no 'HloModule' line"),
    ("latin1-bytes", "{d}/latin1.hlo", "not UTF-8"),
    ("binary", "{d}/binary.hlo", "not UTF-8"),
    ("nul-bytes", "{d}/nul.hlo", "malformed module header"),
    ("only-header", "{d}/only_header.hlo", "has no computations"),
    ("garbled-second-header", "{d}/garbled_header.hlo", "HLO text outside any module"),
    ("truncated", "{d}/truncated.hlo", "expected an instruction"),
    ("corrupt-gzip", "{d}/corrupt.hlo.gz", "gzip"),
    ("truncated-gzip", "{d}/truncated.hlo.gz", "gzip"),
    ("not-gzip", "{d}/plain.hlo.gz", "gzip"),
    ("gzip-of-binary", "{d}/binary.hlo.gz", "not UTF-8"),
    ("parameter-5000-digits", "{d}/param_digits.hlo", "larger than 2,147,483,647"),
    ("parameter-beyond-int64", "{d}/param_big.hlo", "larger than 2,147,483,647"),
    ("parameter-negative", "{d}/param_negative.hlo", "non-negative integer"),
    ("parameter-float", "{d}/param_float.hlo", "non-negative integer"),
    ("parameter-twice", "{d}/param_twice.hlo", "used twice"),
    ("parameter-gap", "{d}/param_gap.hlo", "skip 1"),
    ("header-60000-spaces", "{d}/spaces_header.hlo", "expected a computation header"),
    (
        "header-params-60000-spaces",
        "{d}/spaces_header2.hlo",
        "unexpected text after the result shape",
    ),
    ("operands-40000-comments", "{d}/comments_operands.hlo", "malformed operand"),
    ("operands-100000-parens", "{d}/parens.hlo", "unbalanced parentheses"),
    ("operands-1MB-line", "{d}/long_line.hlo", "malformed operand"),
    ("attribute-60000-spaces", "{d}/spaces_attr.hlo", "unbalanced brackets"),
    ("missing-operand", "{d}/missing_operand.hlo", "is not defined"),
    ("cycle", "{d}/cycle.hlo", "cycle"),
    ("two-roots", "{d}/two_roots.hlo", "2 ROOT instructions"),
    ("two-entries", "{d}/two_entries.hlo", "2 ENTRY computations"),
    ("unknown-callee", "{d}/unknown_callee.hlo", "which is not in module"),
    ("duplicate-instruction", "{d}/dup_instr.hlo", "defined twice"),
    ("no-equals", "{d}/no_equals.hlo", "expected an instruction"),
    ("bad-shape", "{d}/bad_shape.hlo", "expected a shape"),
    ("unclosed", "{d}/unclosed.hlo", "not closed"),
    ("operand-name-5000-chars", "{d}/long_operand.hlo", "characters"),
    ("text-after-brace", "{d}/text_after_brace.hlo", "unexpected text after '}'"),
]


def file_cases(prefix: list[str], suffix: list[str] = ()) -> list[Case]:
    """One case per bad file, the file placed between ``prefix`` and ``suffix``."""
    return [
        Case(f"file-{name}", [*prefix, path, *suffix], needle) for name, path, needle in BAD_FILES
    ]
