"""`retriage review` (retriage/review.py), corrections counted at once by the nearest-label votes, `label --changed`
and maintainers' labels read as corrections (retriage/bot/label_events.py): real DuckDB files, the real model and
the real MiniLM (numpy port)."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb
import numpy as np
import pytest

from conftest import run_cli
from retriage.review import new_words, rank, run_session, words

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

TOPIC = ("[Bug]: hybrid Mamba state pool exhausted: no free mamba slots for new requests with {model} on {gpu}",
         "Serving {model} (hybrid attention + mamba layers) on {gpu}, after a few minutes every new request fails:\n"
         "```\nRuntimeError: mamba state pool exhausted: no free mamba_state slots (allocated 512, in use 512)\n```\n"
         "The KV cache still has free blocks; only the mamba state pool is full.")
PAIRS = [("Nemotron-H-8B", "H100"), ("Jamba-mini", "A100"), ("Granite-4.0-H", "L40S"), ("Falcon-H1-7B", "H200")]
OTHER = ("[Doc]: typo in the quickstart page", "The quickstart says `pip instal vllm`; it should say `pip install`.")


def _issue(number: int, title: str, body: str, day: int) -> dict:
    return {"number": number, "title": title, "body": body, "state": "open", "labels": [],
            "user": {"login": "someone"}, "comments": 0, "created_at": f"2025-07-{day:02d}T10:00:00Z",
            "updated_at": f"2025-07-{day:02d}T10:00:00Z", "closed_at": None,
            "html_url": f"https://github.com/vllm-project/vllm/issues/{number}",
            "repository_url": "https://api.github.com/repos/vllm-project/vllm"}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("review")
    issues = [_issue(90001 + i, TOPIC[0].format(model=m, gpu=g), TOPIC[1].format(model=m, gpu=g), 10 + i)
              for i, (m, g) in enumerate(PAIRS)] + [_issue(90100, *OTHER, 20)]
    f = folder / "issues.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in issues))
    path = folder / "review.duckdb"
    assert run_cli("import", str(f), db=path).returncode == 0
    proc = run_cli("label", "--exact", "--json", db=path)
    assert proc.returncode == 0, proc.stderr
    return path


def test_new_words_are_shared_and_unknown_and_mentions_are_not_topics():
    texts = ["nixl transfer hangs @someuser", "nixl backend and mooncake", "mooncake store", "plain words"]
    fresh = new_words(texts, vocabulary={"backend", "store", "plain", "words", "transfer", "hangs"})
    assert fresh == [{"nixl"}, {"nixl", "mooncake"}, {"mooncake"}, set()]
    assert "someuser" not in words("ping @someuser about v0_25 and 12ab")


def test_rank_takes_unsure_far_and_new_word_clusters_in_turn_without_repeats():
    vec = np.eye(6, dtype=np.float32)
    confidence = np.array([0.9, 0.3, 0.95, 0.9, 0.9, 0.5])
    nearest = np.array([0.9, 0.9, 0.2, 0.9, 0.9, 0.9])
    fresh = [set(), set(), set(), {"mamba"}, {"mamba"}, set()]
    picks = rank(confidence, nearest, vec, fresh, limit=5)
    assert [(p.index, p.kind) for p in picks[:3]] == [(1, "unsure"), (2, "far"), (3, "new_words")]
    assert picks[3].index == 5 and picks[3].kind == "unsure", "next least sure"
    assert len({p.index for p in picks}) == 5 and "mamba" in picks[2].why()
    assert len(rank(confidence, nearest, vec, fresh, limit=50)) == 6


def test_far_picks_spread_a_pick_counts_as_labeled_for_the_next():
    vec = np.array([[1, 0], [0.999, 0.045], [0, 1]], dtype=np.float32)
    picks = rank(np.ones(3), np.array([0.1, 0.1, 0.3]), vec, [set()] * 3, limit=3)
    far = [p.index for p in picks if p.kind == "far"]
    assert far[0] == 0 and 2 in far[:2] or picks[1].index == 2, "after issue 0, its near twin is no longer far"


def test_review_json_lists_predictions_and_why(db):
    proc = run_cli("review", "--json", "--since", "2025-01-01", "--limit", "3", db=db)
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    assert len(items) == 3 and len({i["ref"] for i in items}) == 3
    for i in items:
        assert i["re_class"] in ("RE.1", "RE.2", "RE.3", "RE.4", "none") and i["why"] and i["kind"]
    bad = run_cli("review", "--since", "2025-02-30", db=db)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_confirm_correct_skip_quit_and_a_correction_counts_at_once(db, tmp_path):
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.embedding_cache import embed_views
    from retriage.classifier.features import views
    from retriage.classifier.model import IssueClassifier
    from retriage.classifier.nearest_labels import with_corrections
    from retriage.db.store import Database
    from retriage.review import build_queue

    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    model = IssueClassifier.load()
    database = Database(copy)
    with database.reading() as con:
        items = {i["number"]: i for i in build_queue(con, model, datetime(2025, 1, 1), (), 10)}
    target = items[90004]  # the fourth issue of the topic: the others will be corrected
    before = model.predict([views(target["title"], _body(copy, 90004))], _emb(copy, 90004))[0]
    new = "RE.2" if before.re_class != "RE.2" else "RE.4"
    keys = iter(["x", "y", "c", "c", "s", "q"])  # x is not a key: asked again
    choices = {"class": new, "component": "scheduler", "fix": "none"}
    said: list[str] = []
    s = run_session(database, [items[90001], items[90002], items[90003], items[90100], items[90004]],
                    lambda: next(keys), lambda what, options, default: choices[what] if what != "class" or
                    new in options else default, said.append, by="tester")
    assert (s.confirmed, s.corrected, s.skipped, s.quit) == (1, 2, 1, True)
    con = duckdb.connect(str(copy), read_only=True)
    rows = con.execute("SELECT number, re_class, reason, corrected_by FROM corrections ORDER BY number").fetchall()
    assert rows[0][0] == 90001 and rows[0][2] == "confirmed" and rows[0][1] == items[90001]["re_class"]
    assert [r[:2] for r in rows[1:]] == [(90002, new), (90003, new)] and {r[3] for r in rows} == {"tester"}
    con.close()
    with database.reading() as con:
        corrected = with_corrections(model, con)
    assert corrected.meta["corrections_voting"] == 3 and "corrections_voting" not in model.meta, "the model is not changed"
    after = corrected.predict([views(target["title"], _body(copy, 90004))], _emb(copy, 90004))[0]
    assert after.re_probs[new] > before.re_probs[new] + 0.1, (before.re_probs, after.re_probs)
    # label --changed re-labels the topic's uncorrected issue (its neighbours changed), not the unrelated one
    proc = run_cli("label", "--changed", "--json", db=copy)
    assert proc.returncode == 0, proc.stderr
    con = duckdb.connect(str(copy), read_only=True)
    latest = dict(con.execute("SELECT number, max(labeled_at) FROM predictions GROUP BY number").fetchall())
    con.close()
    assert latest[90004] > latest[90100], "90004 labeled again, 90100 left"
    again = run_cli("label", "--changed", "--json", db=copy)
    assert json.loads(again.stdout)["labeled"] == 0, "nothing changed since"


def _body(path, number):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT body FROM issues WHERE number = ?", [number]).fetchone()[0]
    finally:
        con.close()


def _emb(path, number):
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.embedding_cache import embed_views
    from retriage.classifier.features import views

    con = duckdb.connect(str(path), read_only=True)
    try:
        title, body = con.execute("SELECT title, body FROM issues WHERE number = ?", [number]).fetchone()
        return embed_views(None, [views(title, body)], embedder=get_embedder("numpy"))
    finally:
        con.close()


def test_a_maintainers_label_after_the_bots_comment_is_a_correction(db, tmp_path):
    from retriage.bot.config import load_config
    from retriage.bot.label_events import apply_label_events
    from retriage.db.store import Database

    copy = tmp_path / "events.duckdb"
    copy.write_bytes(db.read_bytes())
    marker = load_config().marker
    con = duckdb.connect(str(copy))
    con.execute("INSERT INTO comments VALUES ('vllm-project/vllm', 90001, 1, 'retriage-bot', ?, "
                "'2025-07-12 00:00:00', '2025-07-12 00:00:00', NULL)", [marker + "\nRE.1 ..."])
    events = [(1, "distributed", "labeled", "maintainer", "2025-07-11 00:00:00"),  # before the comment: not read
              (2, "memory", "labeled", "retriage-bot", "2025-07-12 00:01:00"),  # the bot's own
              (3, "documentation", "labeled", "maintainer", "2025-07-12 01:00:00"),  # says nothing
              (4, "Distributed", "labeled", "maintainer", "2025-07-13 00:00:00"),
              (5, "distributed", "unlabeled", "other-maintainer", "2025-07-14 00:00:00")]
    con.executemany("INSERT INTO label_events VALUES ('vllm-project/vllm', 90001, ?, ?, ?, ?, ?)", events)
    con.close()
    rows = apply_label_events(Database(copy))
    assert [(r["re_class"], r["corrected_by"], r["corrected_at"]) for r in rows] == [
        ("RE.3", "maintainer", datetime(2025, 7, 13)), ("none", "other-maintainer", datetime(2025, 7, 14))]
    assert "label event 4" in rows[0]["reason"]
    assert apply_label_events(Database(copy)) == [], "each event is recorded once"
