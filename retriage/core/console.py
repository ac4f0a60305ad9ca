"""The Rich consoles every layer prints through (stdout for results, stderr for progress and notes), and the
one rule for text taken from issue data on its way to a terminal or a CSV cell: control characters and
bidirectional overrides are shown as escapes (`\\x1b`, `<U+202E>`), never sent raw.

Read commands print Rich tables on a terminal and plain rows elsewhere (gh's convention): `stdout_is_terminal`
tells which, `write_plain` writes the rows (a header, then one row per line, cells tab-separated, values whole)."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(m: re.Match) -> str:
    ch = m.group()
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"<U+{ord(ch):04X}>"


def visible(text: str) -> str:
    """`text` with control characters (but tab and newline) and bidirectional controls made visible."""
    return _UNSAFE.sub(_shown, text) if isinstance(text, str) else text


def console(stderr: bool = False):
    """A rich.console.Console whose printed text passes through `visible` (Rich is imported here, on first
    use: a cold `retriage classify --json` never needs it). Rich's own styles and cursor controls are kept."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render(self, renderable, options=None):
            for seg in super().render(renderable, options):
                if seg.control or not _UNSAFE.search(seg.text):
                    yield seg
                else:
                    yield Segment(visible(seg.text), seg.style, seg.control)

    return SafeConsole(stderr=stderr, highlight=False, soft_wrap=False)


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (False for a pipe, a file, a test's captured output)."""
    import sys

    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def plain_cell(value) -> str:
    """A cell of plain output: whitespace runs (tabs, newlines) become one space, control characters visible."""
    if value is None:
        return ""
    return visible(" ".join(str(value).split()))


def write_plain(header: list[str], rows: list[list], out=None) -> None:
    """Rows as plain text: the header, then one row per line, cells separated by tabs, nothing cut."""
    import sys

    out = out or sys.stdout
    for row in [header, *rows]:
        out.write("\t".join(plain_cell(c) for c in row) + "\n")


def print_table(con, table) -> None:
    """A Rich table on a terminal; elsewhere its title (`# ` line), header, rows and caption as plain rows, whole."""
    if con.is_terminal:
        con.print(table)
        return
    from rich.text import Text

    def text(x) -> str:
        return x.plain if isinstance(x, Text) else Text.from_markup(str(x)).plain

    out = con.file
    if table.title:
        out.write(f"# {plain_cell(text(table.title))}\n")
    write_plain([text(c.header) for c in table.columns],
                [[text(c) for c in row] for row in zip(*(list(c.cells) for c in table.columns))], out)
    for line in text(table.caption or "").splitlines():
        out.write(f"# {plain_cell(line)}\n")
