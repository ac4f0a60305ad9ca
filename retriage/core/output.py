"""Writing output files whole or not at all, and never through something that is not a file.

`-o PATH` everywhere (predict, report) goes through here:
- `-` is standard output;
- a symlink is written through: the file it points to is replaced, the link stays;
- a folder, FIFO, device or socket (at the path or at the end of its links) is refused with one line, and
  never replaced (`/dev/full` stays a device); so is a write-protected file (as `cp` without `-f` would);
- the data goes to a temporary file in the target's own folder, renamed over the target at the end (a failed
  or interrupted write leaves the old file as it was); a new file gets the mode the umask gives (0644
  under the usual 022), an existing one keeps its mode.
- JSON never holds NaN or Infinity (not JSON): `dumps` writes them as null.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from retriage.core.errors import UserError

STDOUT = "-"


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


_RAW_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def dumps(obj, **kw) -> str:
    """json.dumps that never writes NaN or Infinity (they become null), nor a raw control character or
    bidirectional override (written as a \\uXXXX escape: the same JSON value, safe on a terminal)."""
    try:
        text = json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        text = json.dumps(_finite(obj), allow_nan=False, **kw)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def is_stdout(path) -> bool:
    return str(path) == STDOUT


def output_target(path: str | os.PathLike) -> Path:
    """The regular file that writing `path` replaces (symlinks followed), after checking that it can be one;
    a one-line UserError naming `path` otherwise. Call it before long work, so that a bad -o fails at once."""
    shown = str(path)
    target = Path(os.path.realpath(os.path.expanduser(shown)))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UserError(f"cannot write {shown}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UserError(f"cannot write {shown}: it is a folder (give a file name)")
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file")
            raise UserError(f"cannot write {shown}: it is {kind}, not a regular file (use `-o -` for standard "
                            "output)")
        if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
            raise UserError(f"cannot write {shown}: the file is write-protected; not replacing it (remove it, "
                            "or make it writable, first)")
    folder = target.parent
    if not folder.is_dir():
        raise UserError(f"cannot write {shown}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {shown}: folder {folder} is not writable")
    return target


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_output(path: str | os.PathLike, binary: bool = False) -> Iterator[IO]:
    """A file object whose content replaces `path` when the block ends without an exception (standard
    output for `-`)."""
    if is_stdout(path):
        yield sys.stdout.buffer if binary else sys.stdout
        (sys.stdout.buffer if binary else sys.stdout).flush()
        return
    target = output_target(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), _mode_for(target))
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_output(path) as f:
        f.write(text)


def write_jsonl_atomic(path: str | os.PathLike, records: list[dict]) -> None:
    """One JSON object per line (no NaN), written whole or not at all."""
    with atomic_output(path) as f:
        for r in records:
            f.write(dumps(r, ensure_ascii=False) + "\n")
