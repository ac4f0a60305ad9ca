"""`show` of an issue that is not in the database but in the team's labeled set (a real DuckDB file, empty): its
record and label from the labels, a prediction from its labeled text."""

from __future__ import annotations

import pytest

from retriage.classifier.dataset import label_files, read_labels
from retriage.core.errors import UserError
from retriage.db.store import connect
from retriage.lookup import lookup


def test_a_team_labeled_issue_is_shown_from_the_labels(tmp_path):
    con = connect(tmp_path / "empty.duckdb")
    record = next(r for p in label_files() if p.name == "real_trtllm.jsonl" for r in read_labels(p))
    info = lookup(con, f"trtllm#{record['number']}")
    assert info["issue"]["title"] == record["title"] and info["issue"]["body"] == record["body"]
    assert (info["gold"]["re_class"], info["gold"]["component"]) == (record["re_class"], record["component"])
    assert info["similar"] == [] and "team labels" in info["source"]  # an empty database: no neighbours
    # predicted from the labeled text as `retriage predict` predicts it (the one decision of classifier/decision.py)
    from retriage.classifier.predict import predict_records

    want = predict_records([{"repo": info["issue"]["repo"], "number": record["number"], "title": record["title"],
                             "body": record["body"]}])[0]
    got = info["prediction"]
    assert (got["re_class"], got["component"], got["abstained"], got["known_fixes"]) == (
        want["re_class"], want["component"], want["abstained"], want["known_fixes"])
    assert abs(got["confidence"] - want["re_confidence"]) < 1e-3 and "from the labeled text" in got["made_by"]


def test_an_unknown_issue_is_still_a_one_line_error(tmp_path):
    con = connect(tmp_path / "empty.duckdb")
    with pytest.raises(UserError, match="is not in the database"):
        lookup(con, "trtllm#99999999")
