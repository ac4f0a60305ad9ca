"""Everything retriage knows about one issue: the record, its predicted and gold labels, linked PRs, neighbours."""

from __future__ import annotations

import duckdb

from retriage.db import queries
from retriage.core.errors import UserError
from retriage.core.refs import format_ref, parse_ref


def lookup(con: duckdb.DuckDBPyConnection, ref: str, similar: int = 5) -> dict:
    repo, number = parse_ref(ref)
    issue = queries.get_issue(con, repo, number)
    if issue is None:
        raise UserError(f"{format_ref(repo, number)} is not in the database "
                        f"(run `retriage mine {repo}` or `retriage import FILE`)")
    from retriage.classifier import current_model_name, current_model_version  # light: reads metadata only

    version = current_model_version()
    prediction = queries.latest_prediction(con, repo, number, version) or queries.latest_prediction(con, repo, number)
    neighbours = []
    vec = queries.issue_vector(con, repo, number, current_model_name())
    if vec is not None and similar > 0:
        neighbours = queries.similar_to_vector(con, vec, current_model_name(), limit=similar, exclude=(repo, number))
    return {
        "ref": format_ref(repo, number),
        "issue": issue,
        "prediction": prediction,
        "gold": queries.gold_label(con, repo, number),
        "links": queries.links(con, repo, number),
        "similar": neighbours,
    }
