"""`retriage predict`: issue objects in, one prediction per line out (the stable batch contract).

Output line: {"repo", "number", "re_class", "re_confidence", "component", "component_confidence",
"known_fixes": [tags], "abstained": bool}. `re_class` is always one of the classes (the best guess, also when
abstaining). The output file is written whole or not at all.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from retriage.classifier.features import views
from retriage.classifier.predict import known_fixes, predict_views
from retriage.db.importer import iter_objects
from retriage.db.records import RecordError, issue_row
from retriage.errors import UserError
from retriage.taxonomy import engine_for_repo


def read_issues(path: Path) -> list[dict]:
    rows = []
    for where, obj in iter_objects(Path(path)):
        try:
            rows.append(issue_row(obj))
        except RecordError as e:
            raise UserError(f"{path}:{where.removeprefix('line ')}: {e}") from None
    return rows


def predict_records(rows: list[dict]) -> list[dict]:
    v = [views(r["title"], r["body"]) for r in rows]
    preds = predict_views(v)
    out = []
    for r, x, p in zip(rows, v, preds):
        engine = engine_for_repo(r["repo"])
        out.append({
            "repo": r["repo"], "number": r["number"],
            "re_class": p.re_class, "re_confidence": p.re_confidence,
            "component": p.component, "component_confidence": p.component_confidence,
            "known_fixes": known_fixes(x.lexical, engine.id if engine else None),
            "abstained": p.abstained,
        })
    return out


def write_jsonl_atomic(path: Path, records: list[dict]) -> None:
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


def predict_file(input_path: Path, output_path: Path) -> int:
    rows = read_issues(input_path)
    write_jsonl_atomic(output_path, predict_records(rows))
    return len(rows)
