"""Maintainers' labels as corrections: a label that someone other than the bot applied (or removed) on an issue
after the bot's comment says what the issue is, through taxonomy/bot.toml's [corrections] tables (e.g. `memory` ->
RE.1, `distributed` -> RE.3). Each such event is recorded once as a correction (retriage/corrections.py) with who
made it and when; `review` and `label --changed` read them first, and the nearest-label votes count them at once.

Reads table `label_events` (db/migrations/005: `mine` stores each issue's labeled/unlabeled events) and the bot's
comment (the first comment of the issue that starts with the bot's marker; its author is the bot). A removed
label that names a class sets the class to none; a removed component or fix label says nothing sure and is left.
"""

from __future__ import annotations

from contextlib import nullcontext

from retriage.bot.config import BotConfig, load_config
from retriage.core.errors import UserError
from retriage.core.refs import format_ref
from retriage.taxonomy import engine_for_repo

TAG = "label event"  # in the reason: "(label event <id>)", how an event already recorded is recognised


def _has_table(con, name: str) -> bool:
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()[0] > 0


def pending_events(con, marker: str) -> list[dict]:
    """Label events after the bot's comment on their issue, not by the bot, not recorded yet (oldest first)."""
    if not _has_table(con, "label_events"):
        return []
    rows = con.execute(
        f"""WITH bot AS (
                SELECT repo, issue_number AS number, arg_min(author, created_at) AS bot, min(created_at) AS at
                FROM comments WHERE starts_with(ltrim(body), ?) GROUP BY repo, issue_number)
            SELECT e.repo, e.number, e.event_id, e.label, e.action, e.actor, e.created_at
            FROM label_events e JOIN bot b ON b.repo = e.repo AND b.number = e.number
            WHERE e.created_at > b.at AND coalesce(e.actor, '') <> coalesce(b.bot, '')
              AND NOT EXISTS (SELECT 1 FROM corrections c WHERE c.repo = e.repo AND c.number = e.number
                              AND contains(c.reason, '({TAG} ' || e.event_id || ')'))
            ORDER BY e.created_at, e.event_id""", [marker]).fetchall()
    names = ("repo", "number", "event_id", "label", "action", "actor", "created_at")
    return [dict(zip(names, r)) for r in rows]


def correction_of(event: dict, config: BotConfig) -> dict | None:
    """What the event says ({"re_class", "component", "fix"}, any subset), or None when it says nothing."""
    engine = engine_for_repo(event["repo"])
    meaning = config.label_meaning(engine.id if engine else None, event["label"])
    if event["action"] == "labeled":
        out = {"re_class": meaning.get("class"), "component": meaning.get("component"), "fix": meaning.get("fix")}
        return out if any(out.values()) else None
    if event["action"] == "unlabeled" and meaning.get("class") and meaning["class"] != "none":
        return {"re_class": "none", "component": None, "fix": None}
    return None


def apply_label_events(db, config: BotConfig | None = None, model_version: str | None = None) -> list[dict]:
    """Record every pending label event that says something as a correction; returns the recorded rows."""
    from retriage.corrections import relabel

    config = config or load_config()
    with db.reading() if hasattr(db, "reading") else nullcontext(db) as con:
        events = pending_events(con, config.marker)
    out = []
    for e in events:
        c = correction_of(e, config)
        if c is None:
            continue
        verb = "applied" if e["action"] == "labeled" else "removed"
        reason = (f"maintainer's label '{e['label']}' {verb} after the bot's comment ({TAG} {e['event_id']})")
        try:
            out.append(relabel(db, format_ref(e["repo"], e["number"]), c["re_class"], c["component"], c["fix"],
                               reason, e["actor"] or "unknown", model_version, at=e["created_at"]))
        except UserError:  # an issue the database no longer holds, or with no label to keep: nothing to correct
            continue
    return out
