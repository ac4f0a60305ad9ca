"""Writing output files whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from retriage.core.errors import UserError


def write_jsonl_atomic(path: Path, records: list[dict]) -> None:
    """One JSON object per line, through a temporary file in the same folder, renamed over `path` at the end;
    `-` is standard output (written once everything is ready)."""
    if str(path) == "-":
        import sys

        sys.stdout.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        sys.stdout.flush()
        return
    path = Path(path)
    if path.parent and not path.parent.resolve().exists():
        raise UserError(f"cannot write {path}: folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".retriage-", suffix=".jsonl", dir=str(path.parent.resolve()))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
