"""Reading a whole input text file (import, predict -i, eval --gold) without trusting it: a folder, a device
that never ends (/dev/zero, /dev/urandom), NUL bytes, bytes that are not UTF-8, broken gzip data, a gzip bomb
and more than MAX_BYTES of text all end as one-line UsageErrors. The input is read as a stream (a FIFO such as
`<(zcat x.gz)` works), in chunks, each checked as it arrives: /dev/zero is refused after its first megabyte."""

from __future__ import annotations

import codecs
import itertools
import sys
from contextlib import nullcontext
import zlib
from pathlib import Path
from typing import Iterable, Iterator

from retriage.core.errors import UsageError

MAX_BYTES = 2 << 30  # 2 GiB of (decompressed) text; larger inputs are split by the user
CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


def _gunzip(raw: Iterable[bytes], path: Path) -> Iterator[bytes]:
    """Decompress gzip members one after another, CHUNK bytes of output at a time (a bomb stops at the cap)."""
    d = zlib.decompressobj(31)
    pending = b""
    try:
        for data in raw:
            data = pending + data
            pending = b""
            while data:
                if d is None:
                    if len(data) < 2:
                        pending = data
                        break
                    if data[:2] != GZIP_MAGIC:
                        raise UsageError(f"{path}: broken gzip data (bytes after the end of the compressed data)")
                    d = zlib.decompressobj(31)
                out = d.decompress(data, CHUNK)
                if out:
                    yield out
                if d.eof:
                    data, d = d.unused_data, None
                else:
                    data = d.unconsumed_tail
                    while not data and (out := d.decompress(b"", CHUNK)):
                        yield out
                        data = d.unconsumed_tail
    except zlib.error as e:
        raise UsageError(f"{path}: broken gzip data ({e})") from None
    if d is not None or pending:
        raise UsageError(f"{path}: truncated gzip data (the compressed stream ends early)")


def _chunks(path: Path) -> Iterator[bytes]:
    """The file's bytes in chunks, gunzipped when they are gzip; `-` is standard input."""
    with (nullcontext(sys.stdin.buffer) if str(path) == "-" else open(path, "rb")) as f:
        first = f.read(CHUNK)
        rest = iter(lambda: f.read(CHUNK), b"")
        if first[:2] == GZIP_MAGIC:
            yield from _gunzip(itertools.chain([first], rest), path)
        else:
            yield from itertools.chain([first] if first else [], rest)


def text_chunks(path: str | Path, max_bytes: int = MAX_BYTES) -> Iterator[str]:
    """The UTF-8 text of a file or of a gzipped file (a leading BOM dropped), about a megabyte at a time, each
    chunk checked as it arrives: NUL bytes, bytes that are not UTF-8, broken gzip, more than `max_bytes` of
    text. Nothing but the current chunk is held, so a reader that parses as it goes stays small."""
    path = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
    offset = 0
    try:
        if path.is_dir():
            raise IsADirectoryError
        for chunk in _chunks(path):
            nul = chunk.find(b"\x00")
            if nul >= 0:
                raise UsageError(f"{path}: NUL byte at byte {offset + nul}: not a text file")
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as e:
                raise UsageError(f"{path}: not UTF-8 text (byte {offset + e.start})") from None
            offset += len(chunk)
            if offset > max_bytes:
                raise UsageError(f"{path}: more than {max_bytes:,} bytes of text: split it into smaller files")
            if text:
                yield text
        try:
            text = decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise UsageError(f"{path}: not UTF-8 text (ends inside a character)") from None
        if text:
            yield text
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None


def read_text(path: str | Path, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a file or of a gzipped file (a leading BOM dropped), whole."""
    return "".join(text_chunks(path, max_bytes))
