"""What retriage knows about one issue or one pasted log, as the bot says it.

A Verdict holds the classify result (TriageResult: class, component, the matched rules' fixes with this engine's
steps, evidence lines, similar issues) and, for each similar issue, whether a pull request that fixes it is
linked and which fix is recorded for it (the team's label, else the model's). An issue is read as `show` and
`label` read it (its title and body through the classifier), not as a pasted log: its class, abstention and
known fixes are the one decision of classifier/decision.py. Its evidence is the machine lines that carry the
failure (core/textprep.failure_lines), and a regression it names (triage/regression.py) is read from its title
and body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from retriage.classifier import current_model_name
from retriage.classifier.decision import Decision, decide_issue
from retriage.classifier.embed import get_embedder
from retriage.classifier.features import views
from retriage.classifier.model import IssueClassifier
from retriage.classifier.predict import predict_views
from retriage.core.errors import UserError
from retriage.core.refs import format_ref
from retriage.core.rules import applies_to
from retriage.core.textprep import failure_lines, for_reading
from retriage.db import queries
from retriage.db.similar import similar_issues
from retriage.taxonomy import engine_for_repo
from retriage.triage.classify import MAX_FIXES, TriageResult
from retriage.triage.fixtext import fix as fix_entry
from retriage.triage.fixtext import tag_fix
from retriage.triage.regression import regression_advice

MAX_EVIDENCE = 6
SIMILAR_CANDIDATES = 10  # asked of the database; the comment keeps those above its threshold


@dataclass
class Verdict:
    result: TriageResult
    ref: str | None = None              # the issue ("vllm#123"); None for a pasted log
    title: str | None = None
    labels: list[str] = field(default_factory=list)  # the issue's labels now
    head_fix: dict | None = None        # the fix head's tag where no rule matched: its rule's steps for this engine
    head_fix_confidence: float = 0.0
    decision: Decision | None = None    # the issue's decision (None for a pasted log): known fixes, how it was made
    reported_on: str | None = None      # "reported on vLLM 0.26.0 — N other RE.3 reports on 0.26" (db/versions.py)


def recorded_fix(con: duckdb.DuckDBPyConnection, repo: str, number: int, model_version: str | None):
    """(fix tag, who recorded it) for a past issue: the team's label, else the model's first fix; or (None, None)."""
    gold = queries.gold_label(con, repo, number)
    if gold and gold.get("known_fix") not in (None, "none"):
        return gold["known_fix"], "team label"
    pred = queries.latest_prediction(con, repo, number, model_version)
    if pred and pred.get("known_fixes"):
        return pred["known_fixes"][0], "model"
    return None, None


def enrich_similar(con: duckdb.DuckDBPyConnection | None, similar: list[dict], model_version: str | None) -> list[dict]:
    """Similar issues with `fixed_by` (linked fixing pull requests) and `recorded_fix` / `recorded_by`."""
    out = []
    for s in similar:
        s = dict(s)
        if con is not None:
            s["fixed_by"] = queries.links(con, s["repo"], s["number"])["fixed_by"]
            s["recorded_fix"], s["recorded_by"] = recorded_fix(con, s["repo"], s["number"], model_version)
        else:
            s["fixed_by"], s["recorded_fix"], s["recorded_by"] = [], s.get("known_fix"), "team label"
        out.append(s)
    return out


def issue_verdict(con: duckdb.DuckDBPyConnection, repo: str, number: int,
                  model: IssueClassifier | None = None) -> Verdict:
    """The verdict on a stored issue (labeled first if need be: its embeddings are then in the database)."""
    issue = queries.get_issue(con, repo, number)
    if issue is None:
        raise UserError(f"{format_ref(repo, number)} is not in the database")
    model = model or IssueClassifier.load()
    e = engine_for_repo(repo)
    engine = e.id if e else None
    doc = views(issue["title"], issue["body"])
    pred = predict_views([doc], model, con, get_embedder("numpy"))[0]
    d = decide_issue(doc, issue["body"], engine, pred, model.version)
    matches = [m for m in doc.matches if applies_to(m.rule, engine)]
    # evidence: the machine lines that carry the failure, in the rules' matches and the body as `show` reads it
    body_lines = for_reading(issue["body"] or "", 60000).splitlines()
    evidence = [x for x in failure_lines([m.line for m in matches[:MAX_FIXES]] + body_lines)
                if x != (issue["title"] or "").strip()][:MAX_EVIDENCE]
    regression = regression_advice(f"{issue['title'] or ''}\n{issue['body'] or ''}")
    similar = []
    vector = queries.issue_vector(con, repo, number, current_model_name())
    if vector is not None:
        similar = [{k: s[k] for k in ("repo", "number", "title", "state", "score", "html_url", "known_fix")}
                   for s in similar_issues(con, vector, current_model_name(), limit=SIMILAR_CANDIDATES,
                                           exclude=(repo, number))]  # the one path show and classify use
    disagreement = None
    if matches and matches[0].rule.re_class != d.re_class:
        said = (f"the model says {d.re_class} ({pred.re_confidence:.2f})" if d.re_class == pred.re_class else
                f"{d.re_class} by a rule's class for mixed GPUs (the model said {pred.re_class}, "
                f"{pred.re_confidence:.2f})")
        disagreement = f"rule {matches[0].rule.id} implies {matches[0].rule.re_class}, {said}"
    result = TriageResult(
        engine=engine, engine_reason=f"the issue's repository ({repo})",
        re_class=d.re_class, re_confidence=pred.re_confidence, component=pred.component,
        component_confidence=pred.component_confidence, abstained=d.abstained,
        fixes=[fix_entry(m, engine) for m in matches[:MAX_FIXES]], evidence=evidence,
        similar=enrich_similar(con, similar, model.version), disagreement=disagreement,
        model_version=model.version, regression=regression)
    head = tag_fix(d.head_fix, engine) if not matches and d.head_fix != "none" else None
    from retriage.db.versions import reported_on

    return Verdict(result, format_ref(repo, number), issue["title"], list(issue["labels"] or []), head,
                   d.head_fix_confidence if head else 0.0, d,
                   reported_on(con, repo, number, d.re_class, model.version))


def log_verdict(result: TriageResult, con: duckdb.DuckDBPyConnection | None = None) -> Verdict:
    """The verdict on a pasted log (`retriage classify --format markdown`)."""
    import dataclasses

    enriched = dataclasses.replace(result, similar=enrich_similar(con, result.similar, result.model_version))
    return Verdict(enriched)
