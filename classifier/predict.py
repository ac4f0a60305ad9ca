"""Prediction for issue texts and records: the library behind `retriage predict`, `retriage label` and
`retriage eval`.

`predict_file` is the stable batch contract of `retriage predict`: issue objects in, one line per input issue
out, {"repo", "number", "re_class", "re_confidence", "component", "component_confidence", "known_fixes": [tags],
"abstained": bool}; `re_class` is always one of the classes (the best guess, also when abstaining); the output
is written whole or not at all. Class, abstention and fixes are the one decision `label` stores and `show` shows
(classifier/decision.py: a rule's class for mixed GPUs, the rules' and the fix head's fixes, class and fix agreeing)."""

from __future__ import annotations

from typing import Callable

import duckdb

from retriage.classifier.decision import decide_issue, merged_fixes
from retriage.classifier.features import Views, views
from retriage.classifier.model import IssueClassifier, Prediction
from retriage.classifier.embed import Embedder
from retriage.classifier.embedding_cache import embed_views
from retriage.core.output import is_stdout, output_target, write_jsonl_atomic
from retriage.db.importer import read_rows
from retriage.taxonomy import engine_for_repo


def fixes_for(doc: Views, engine: str | None, prediction: Prediction | None) -> list[str]:
    """Known-fix tags of an issue: the matching rules' (in priority order), then the fix head's tag."""
    return merged_fixes(doc.fixes(engine), prediction.fix_for(engine)[0] if prediction is not None else "none")


def predict_views(v: list[Views], model: IssueClassifier | None = None,
                  con: duckdb.DuckDBPyConnection | None = None, embedder: Embedder | None = None,
                  progress: Callable[[int], None] | None = None) -> list[Prediction]:
    """Predictions for issues whose views are already prepared (default embedder: sentence-transformers)."""
    model = model or IssueClassifier.load()
    if not v:
        return []
    return model.predict(v, embed_views(con, v, progress, embedder))


def predict_records(rows: list[dict], model: IssueClassifier | None = None) -> list[dict]:
    """The batch contract's output lines for issue rows (db.records shape), in input order."""
    model = model or IssueClassifier.load()
    v = [views(r["title"], r["body"]) for r in rows]
    preds = predict_views(v, model)
    out = []
    for r, x, p in zip(rows, v, preds):
        engine = engine_for_repo(r["repo"])
        d = decide_issue(x, r["body"], engine.id if engine else None, p, model.version)
        out.append({
            "repo": r["repo"], "number": r["number"],
            "re_class": d.re_class, "re_confidence": p.re_confidence,
            "component": p.component, "component_confidence": p.component_confidence,
            "known_fixes": d.known_fixes,
            "abstained": d.abstained,
        })
    return out


def predict_file(input_path, output_path, model: IssueClassifier | None = None) -> int:
    """Read and check the input and the output path first (a bad one fails before any embedding), then
    predict and write (`-` is standard output)."""
    if not is_stdout(output_path):
        output_target(output_path)
    rows = read_rows([input_path])
    write_jsonl_atomic(output_path, predict_records(rows, model))
    return len(rows)
