"""`retriage classify`: a pasted log -> engine, root-cause class and component, known fixes with this engine's
flags, the evidence lines, and similar past issues.

The class and component come from the embedding classifier, whose features include the rule matches; the
first matching rule gives the fix. When the rule's class and the model's class differ, the result says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from retriage.classifier.embed import NumpyMiniLM
from retriage.classifier.features import VIEW_FIELDS, views
from retriage.classifier.model import IssueClassifier
from retriage.triage import engine as engine_detect
from retriage.triage import logtext
from retriage.triage.rules import Match, match_rules

MAX_FIXES = 3


@dataclass
class TriageResult:
    engine: str | None
    engine_reason: str
    re_class: str
    re_confidence: float
    component: str
    component_confidence: float
    abstained: bool
    fixes: list[dict]
    evidence: list[str]
    similar: list[dict]
    exception: str | None = None
    frames: list[str] = field(default_factory=list)
    disagreement: str | None = None
    notes: list[str] = field(default_factory=list)
    model_version: str | None = None

    def to_json(self) -> dict:
        """The documented --json shape (README, "classify")."""
        d = asdict(self)
        keys = ["engine", "engine_reason", "re_class", "re_confidence", "component", "component_confidence",
                "abstained", "fixes", "evidence", "similar", "exception", "frames", "disagreement", "notes",
                "model_version"]
        return {k: d[k] for k in keys}


def _fix(m: Match, engine: str | None) -> dict:
    r = m.rule
    return {"id": r.id, "tag": r.tag, "title": r.title, "re_class": r.re_class, "component": r.component,
            "steps": r.steps_for(engine), "caveats": list(r.caveats), "sources": list(r.sources), "line": m.line}


class Triage:
    """Holds the loaded model and embedder so that a long-lived process answers each trace quickly."""

    def __init__(self, model: IssueClassifier | None = None, embedder=None):
        self.model = model or IssueClassifier.load()
        self.embedder = embedder or NumpyMiniLM()

    def _encode_views(self, texts: list[str]) -> list:
        """One embedding per view, computed in parallel threads (the matrix products release the GIL).

        BLAS goes to one thread here, before the threads start: limited from inside the threads instead, a
        process that had run BLAS multi-threaded before took ~15x longer."""
        from concurrent.futures import ThreadPoolExecutor

        from retriage.classifier.embed import one_blas_thread

        with one_blas_thread(), ThreadPoolExecutor(len(texts)) as pool:
            return list(pool.map(lambda t: self.embedder.encode([t]), texts))

    def run(self, data: bytes | str, engine: str | None = None, con=None, similar: int = 5) -> TriageResult:
        """`con`: a DuckDB connection, a function returning one (or None), or None for no similar issues."""
        log = logtext.parse(data)
        guess = engine_detect.detect(log.text, engine)
        matches = match_rules(log.lines, guess.engine)
        title = log.lines[log.exception_line] if log.exception_line is not None else (
            log.lines[log.last_error_line] if log.last_error_line is not None else "")
        v = views(title, log.text)
        emb = self._encode_views([getattr(v, f) for f in VIEW_FIELDS])
        pred = self.model.predict([v], emb)[0]

        evidence: list[str] = []
        for line in [m.line for m in matches[:MAX_FIXES]] + [title]:
            line = line.strip()[:400]  # cut before comparing: a long line must not appear twice
            if line and line not in evidence:
                evidence.append(line)
        disagreement = None
        if matches and matches[0].rule.re_class != pred.re_class:
            disagreement = (f"rule {matches[0].rule.id} implies {matches[0].rule.re_class}, "
                            f"the model says {pred.re_class} ({pred.re_confidence:.2f})")
        neighbours = []
        if callable(con):  # a connection still being opened in the background
            con = con()
        if con is not None and similar > 0:
            from retriage.classifier import current_model_name
            from retriage.db.queries import similar_to_vector

            neighbours = [
                {"repo": n["repo"], "number": n["number"], "title": n["title"], "state": n["state"],
                 "score": round(float(n["score"]), 4), "html_url": n["html_url"], "known_fix": n.get("known_fix")}
                for n in similar_to_vector(con, emb[0][0], current_model_name(), limit=similar)
            ]
        exc = None
        if log.exception_type:
            exc = f"{log.exception_type}: {log.exception_message}".rstrip(": ")
        return TriageResult(
            engine=guess.engine, engine_reason=guess.reason,
            re_class=pred.re_class, re_confidence=pred.re_confidence,
            component=pred.component, component_confidence=pred.component_confidence, abstained=pred.abstained,
            fixes=[_fix(m, guess.engine) for m in matches[:MAX_FIXES]], evidence=evidence, similar=neighbours,
            exception=exc, frames=log.frames, disagreement=disagreement, notes=log.notes,
            model_version=self.model.version,
        )
