"""`show` of an issue that is not in the database but in the team's labeled set (a real DuckDB file, empty)."""

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
    assert info["prediction"] is None and info["similar"] == [] and "team labels" in info["source"]


def test_an_unknown_issue_is_still_a_one_line_error(tmp_path):
    con = connect(tmp_path / "empty.duckdb")
    with pytest.raises(UserError, match="is not in the database"):
        lookup(con, "trtllm#99999999")
