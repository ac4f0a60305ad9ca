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
            return labeled
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
    return {
        "ref": format_ref(repo, number),
        "issue": issue,
        "prediction": prediction,
        "gold": queries.gold_label(con, repo, number),
        "correction": queries.correction(con, repo, number),  # `retriage relabel`: overrides the prediction
        "links": queries.links(con, repo, number),
        "similar": neighbours,
        "advice": issue_advice(issue, (prediction or {}).get("known_fixes")),  # the fix steps the bot gives
    }
