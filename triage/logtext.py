"""A pasted log or stack trace -> clean lines, plus the parts a person looks for first.

Decoding never fails (invalid bytes are replaced); binary and empty input are refused with a one-line
UserError (exit code 2); inputs beyond MAX_BYTES keep their head and tail with a note in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from retriage.core.textprep import FRAME_RE, strip_ansi, strip_prefix
from retriage.core.errors import UserError
from retriage.core.rules import is_wrapper

MAX_BYTES = 300_000
HEAD_BYTES = 100_000

_EXC_RE = re.compile(
    r"^\s*((?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|AssertionError|KeyError|OutOfMemoryError))"
    r"(?::\s*(.*))?$")
_ERROR_RE = re.compile(
    r"(?i)(?:\berror\b|\bfailed\b|failure|out of memory|exception|segmentation fault|core dumped|bus error|"
    r"illegal memory|assert|abort|terminate called|timed? ?out|not enough|insufficient|cannot|unable to|killed)")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


@dataclass
class LogText:
    lines: list[str]  # cleaned lines (ANSI codes and log prefixes stripped)
    exception_type: str | None = None
    exception_message: str | None = None
    exception_line: int | None = None
    frames: list[str] = field(default_factory=list)  # last frames of the last traceback: "path:line in func"
    last_error_line: int | None = None  # last error-looking line that is not a wrapper
    notes: list[str] = field(default_factory=list)
    raw: str = ""  # the decoded input before log prefixes were stripped (worker tags such as "(RayWorker pid=1)")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


CUT = b"\n[... cut by retriage ...]\n"


@dataclass(frozen=True)
class HeadTail:
    """A long input as read from a stream: only the head and tail that `decode` keeps, and the full size."""

    data: bytes
    size: int


def _refuse_nul(sample: bytes) -> None:
    if sample.count(b"\x00") > max(8, len(sample) // 1000):
        raise UserError("input looks binary (NUL bytes): paste a text log or stack trace", exit_code=2)


def read_head_tail(stream) -> bytes | HeadTail:
    """Read a binary stream to its end holding at most MAX_BYTES: the whole input when it is short, else its
    first HEAD_BYTES and a rolling last part. NUL-filled input (/dev/zero) is refused before reading on."""
    head = stream.read(MAX_BYTES + 1)
    if len(head) <= MAX_BYTES:
        return head
    _refuse_nul(head[:65536])
    keep, size = MAX_BYTES - HEAD_BYTES, len(head)
    tail = bytearray(head[-keep:])
    while chunk := stream.read(1 << 20):
        size += len(chunk)
        tail += chunk
        del tail[:-keep]
    return HeadTail(head[:HEAD_BYTES] + CUT + bytes(tail), size)


def decode(data: bytes | str | HeadTail) -> tuple[str, list[str]]:
    notes = []
    if isinstance(data, HeadTail):
        raw, size = data.data, data.size
    else:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        size = len(raw)
        if size > MAX_BYTES:
            raw = raw[:HEAD_BYTES] + CUT + raw[-(MAX_BYTES - HEAD_BYTES):]
    if size > MAX_BYTES:
        notes.append(f"input is {size:,} bytes: kept the first {HEAD_BYTES:,} and the last "
                     f"{MAX_BYTES - HEAD_BYTES:,}")
    _refuse_nul(raw[:65536])
    text = raw.decode("utf-8", "replace")
    if "\ufffd" in text:
        notes.append("input is not valid UTF-8: undecodable bytes were replaced")
    body = strip_ansi(text)
    controls = len(_CONTROL_RE.findall(body[:65536]))
    replaced = body[:65536].count("\ufffd")
    if body and (controls + replaced) > 0.1 * min(len(body), 65536):
        raise UserError("input looks binary, not a log: paste a text log or stack trace", exit_code=2)
    return body, notes


def parse(data: bytes | str) -> LogText:
    body, notes = decode(data)
    lines = []
    for raw in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = strip_prefix(raw).rstrip()
        if line.strip():
            lines.append(line)
    if not lines:
        raise UserError("empty input: paste a log or stack trace (a file argument or standard input)", exit_code=2)
    log = LogText(lines, notes=notes, raw=body)
    frames: list[str] = []
    for i, line in enumerate(lines):
        m = FRAME_RE.match(line)
        if m:
            frames.append(f"{'/'.join(m.group(1).split('/')[-3:])}:{m.group(2)} in {m.group(3)}")
            continue
        e = _EXC_RE.match(line)
        if e and not is_wrapper(line):
            log.exception_type, log.exception_message, log.exception_line = e.group(1), (e.group(2) or ""), i
            log.frames = frames[-5:]
            frames = []
    for i in range(len(lines) - 1, -1, -1):
        if _ERROR_RE.search(lines[i]) and not is_wrapper(lines[i]) and not FRAME_RE.match(lines[i]):
            log.last_error_line = i
            break
    return log
