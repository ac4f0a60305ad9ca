"""The CLI's standard output and error, with every line passed through `secrets.redact` last.

A line is held until its newline (or a flush) so that a secret written in two pieces is still seen whole.
A closed standard output (`>&-`) becomes a stream whose writes fail with EBADF, which the CLI reports in one
line instead of crashing on `None`.
"""

from __future__ import annotations

import errno
import io

from retriage.core.secrets import redact

_HOLD_LIMIT = 1 << 16  # a line longer than this is written in pieces


class ReaderGone(Exception):
    """The reader of the stream went away (EPIPE). Not an OSError, so that nothing between the write and the
    CLI's main (Click turns EPIPE into exit 1) takes it for a failure: `retriage ... | head` ends with 0."""


class ClosedStream(io.TextIOBase):
    """Standard output or error that the shell closed."""

    def __init__(self, name: str):
        self.name = name

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, f"{self.name} is closed")

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


class RedactingStream:
    """A text stream wrapper: whole lines redacted on their way to `raw`; everything else delegated."""

    def __init__(self, raw):
        self._raw = raw
        self._held = ""

    def write(self, text: str) -> int:
        data = self._held + text
        cut = data.rfind("\n") + 1
        if not cut and len(data) > _HOLD_LIMIT:
            cut = len(data)
        self._held = data[cut:]
        if cut:
            self._send(redact(data[:cut]))
        return len(text)

    def _send(self, text: str) -> None:
        try:
            self._raw.write(text)
        except BrokenPipeError:
            self._held = ""
            raise ReaderGone() from None

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._send(redact(held))
        try:
            self._raw.flush()
        except BrokenPipeError:
            raise ReaderGone() from None

    def discard(self) -> None:
        """Drop what is held (after the reader went away)."""
        self._held = ""

    def __getattr__(self, name):
        return getattr(self._raw, name)
