"""Everything retriage knows about one issue: the record, its predicted and gold labels, linked PRs, neighbours."""

from __future__ import annotations

import duckdb

from retriage.db import queries
from retriage.core.errors import UserError
from retriage.core.refs import format_ref, parse_ref
from retriage.triage.fixtext import issue_advice


def team_labeled(repo: str, number: int) -> dict | None:
    """An issue that is not in the database but in the team's labeled set (taxonomy/labels): its record as
    the labeled set holds it (for records from outside the corpus, machine output verbatim and the prose
    paraphrased) and the team's label; no prediction, no similar issues."""
    from retriage.classifier.dataset import load_gold

    e = next((x for x in load_gold() if x.key == (repo, number)), None)
    if e is None:
        return None
    from datetime import datetime

    created = datetime.fromisoformat(e.created_at) if e.created_at else None
    issue = {"repo": repo, "number": number, "title": e.title, "body": e.body, "state": e.state or None,
             "labels": list(e.gh_labels), "created_at": created, "closed_at": None, "comments": None,
             "is_pull_request": False, "html_url": e.html_url}
    gold = {"repo": repo, "number": number, "re_class": e.re_class, "component": e.component,
            "known_fix": e.known_fix, "reason": e.reason, "labeler": e.labeler}
    return {"ref": format_ref(repo, number), "issue": issue, "prediction": None, "gold": gold,
            "links": {"fixed_by": [], "fixes": []}, "similar": [],
            "source": "team labels only (not in the database): taxonomy/labels"}


def predict_labeled(con: duckdb.DuckDBPyConnection, info: dict, similar: int, model: str | None) -> dict:
    """A labeled-only issue (`team_labeled`) read as `label` reads an issue: its labeled title and body through the
    model and the one decision (classifier/decision.py), the known fixes' steps for its engine, and the similar
    issues of the database to its vector. Nothing is stored."""
    from datetime import datetime, timezone

    from retriage.classifier import current_model_name
    from retriage.classifier.decision import decide_issue
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.embedding_cache import embed_views
    from retriage.classifier.features import views
    from retriage.classifier.model import IssueClassifier
    from retriage.taxonomy import engine_for_repo

    issue = info["issue"]
    classifier = IssueClassifier.load(model)
    doc = views(issue["title"], issue["body"])
    embedded = embed_views(None, [doc], embedder=get_embedder("numpy"))  # read-only: nothing cached
    pred = classifier.predict([doc], embedded)[0]
    e = engine_for_repo(issue["repo"])
    d = decide_issue(doc, issue["body"], e.id if e else None, pred, classifier.version)
    info["prediction"] = {"repo": issue["repo"], "number": issue["number"], "re_class": d.re_class,
                          "component": pred.component, "confidence": pred.re_confidence,
                          "component_confidence": pred.component_confidence, "abstained": d.abstained,
                          "known_fixes": d.known_fixes, "model_version": classifier.version,
                          "labeled_at": datetime.now(timezone.utc).replace(tzinfo=None),
                          "made_by": d.made_by + " · from the labeled text (not stored)", "note": d.note}
    info["advice"] = issue_advice(issue, d.known_fixes)
    if similar > 0:
        from retriage.db.similar import similar_issues

        info["similar"] = similar_issues(con, embedded[0][0], current_model_name(model), limit=similar,
                                         exclude=(issue["repo"], issue["number"]))
    return info


MAX_SIMILAR = 100


def lookup(con: duckdb.DuckDBPyConnection, ref: str, similar: int = 5, model: str | None = None) -> dict:
    """`model`: the model folder whose predictions to show (default: $RETRIAGE_MODEL, else the shipped one)."""
    if not 0 <= similar <= MAX_SIMILAR:
        raise UserError(f"--similar must be from 0 to {MAX_SIMILAR}, not {similar}", exit_code=2)
    repo, number = parse_ref(ref)
    issue = queries.get_issue(con, repo, number)
    if issue is None:
        labeled = team_labeled(repo, number)
        if labeled is not None:
            labeled["correction"] = queries.correction(con, repo, number)
            return predict_labeled(con, labeled, similar, model)
        raise UserError(f"{format_ref(repo, number)} is not in the database "
                        f"(run `retriage mine {repo}` or `retriage import FILE`)")
    from retriage.classifier import current_model_name, current_model_version  # light: reads metadata only

    version, name = current_model_version(model), current_model_name(model)
    prediction = queries.latest_prediction(con, repo, number, version) or queries.latest_prediction(con, repo, number)
    if prediction is not None and prediction["made_by"] is None:  # stored before its note was (schema version 4)
        from retriage.classifier.decision import unchecked_note

        prediction["note"] = unchecked_note(prediction["re_class"], prediction["known_fixes"])
    neighbours = []
    vec = queries.issue_vector(con, repo, number, name)
    if vec is not None and similar > 0:
        from retriage.db.similar import similar_issues

        neighbours = similar_issues(con, vec, name, limit=similar, exclude=(repo, number))
    correction = queries.correction(con, repo, number)
    from retriage.db.versions import reported_on

    re_class = (correction or prediction or {}).get("re_class")
    return {
        "ref": format_ref(repo, number),
        "issue": issue,
        "prediction": prediction,
        "gold": queries.gold_label(con, repo, number),
        "correction": correction,  # `retriage relabel`: overrides the prediction
        # "reported on vLLM 0.26.0 — N other RE.3 reports on 0.26" (db/versions.py); None when unknown
        "reported_on": reported_on(con, repo, number, re_class, (prediction or {}).get("model_version") or version),
        "links": queries.links(con, repo, number),
        "similar": neighbours,
        "advice": issue_advice(issue, (prediction or {}).get("known_fixes")),  # the fix steps the bot gives
    }
