"""`retriage relabel`: record a correction of an issue's label (who, when, why) — the library call behind the
command. The newest correction of an issue overrides the model's prediction in `show` and `list`, the nearest-label
votes read it at once (classifier/nearest_labels.with_corrections), and `train` learns it (classifier/train.py reads
the corrections in force beside the labeled set). `review` and maintainers' labels (retriage/bot/label_events.py)
record theirs here too."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone

from retriage import taxonomy
from retriage.core.errors import UserError
from retriage.core.refs import format_ref, parse_ref
from retriage.db import queries, writes
from retriage.db.store import transaction


def _check(value: str | None, choices: list[str], option: str) -> str | None:
    if value is not None and value not in choices:
        raise UserError(f"{option} must be one of {', '.join(choices)}, not {value!r}", exit_code=2)
    return value


def who(by: str | None = None) -> str:
    """--by, else $USER, else git's user.name, else "unknown"."""
    if by and by.strip():
        return by.strip()
    if os.environ.get("USER"):
        return os.environ["USER"]
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or "unknown"


def _current(con, repo: str, number: int, model_version: str | None) -> tuple[dict | None, str]:
    """The label shown now (correction, else prediction, else team label) as re_class/component/known_fix,
    and where it came from."""
    c = queries.correction(con, repo, number)
    if c:
        return c, f"correction by {c['corrected_by']}"
    p = queries.latest_prediction(con, repo, number, model_version) or queries.latest_prediction(con, repo, number)
    if p:
        fixes = p.get("known_fixes") or []
        return {"re_class": p["re_class"], "component": p["component"], "known_fix": fixes[0] if fixes else "none"}, \
            f"prediction {p['model_version']}"
    g = queries.gold_label(con, repo, number)
    if g:
        return g, "team label"
    return None, ""


def relabel(db, ref: str, re_class: str | None = None, component: str | None = None, fix: str | None = None,
            reason: str = "", by: str | None = None, model_version: str | None = None,
            at: datetime | None = None) -> dict:
    """Record a correction; the options not given keep the label shown now. Returns the stored row. `at`: when
    it was made (UTC; default now), for a maintainer's label event read as a correction."""
    repo, number = parse_ref(ref)
    _check(re_class, taxonomy.re_class_ids(), "--class")
    _check(component, taxonomy.component_ids(), "--component")
    _check(fix, taxonomy.fix_tag_ids(), "--fix")
    if re_class is None and component is None and fix is None:
        raise UserError("give at least one of --class, --component, --fix", exit_code=2)
    if not reason or not reason.strip():
        raise UserError("--reason is required: say why the label is wrong", exit_code=2)
    with transaction(db) as con:
        known = queries.get_issue(con, repo, number) is not None or queries.gold_label(con, repo, number)
        if not known:
            from retriage.classifier.dataset import load_gold  # the team's labels (show can show those issues)

            known = any(e.key == (repo, number) for e in load_gold())
        if not known:
            raise UserError(f"{format_ref(repo, number)} is not in the database "
                            f"(run `retriage mine {repo}` or `retriage import FILE` first)")
        now_label, source = _current(con, repo, number, model_version)
        missing = [opt for opt, v in (("--class", re_class), ("--component", component), ("--fix", fix)) if v is None]
        if now_label is None and missing:
            raise UserError(f"{format_ref(repo, number)} has no label yet to keep: give {', '.join(missing)} too",
                            exit_code=2)
        base = now_label or {}
        row = {"repo": repo, "number": number,
               "re_class": re_class or base["re_class"], "component": component or base["component"],
               "known_fix": fix or base.get("known_fix") or "none", "reason": reason.strip(),
               "corrected_by": who(by),
               "corrected_at": at or datetime.now(timezone.utc).replace(tzinfo=None),
               "was": (f"{base['re_class']} / {base['component']} / {base.get('known_fix') or 'none'} ({source})"
                       if now_label else None)}
        writes.save_correction(con, row)
    return {"ref": format_ref(repo, number), **row}
