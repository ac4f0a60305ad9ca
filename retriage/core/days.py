"""Days as users type them: `2025-01-31`, or relative to today (UTC): `30d`, `12w`, `6m` (months of 30 days)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

from retriage.core.errors import UserError

_RELATIVE = re.compile(r"^(\d{1,4})([dwm])$")
_UNIT_DAYS = {"d": 1, "w": 7, "m": 30}


def parse_day(value: str | None, option: str, today: date | None = None) -> date | None:
    """The day `value` names, or None for None/''. A bad value is a one-line UserError naming the option."""
    if value is None or not value.strip():
        return None
    text = value.strip().lower()
    m = _RELATIVE.match(text)
    if m:
        today = today or datetime.now(timezone.utc).date()
        return today - timedelta(days=int(m.group(1)) * _UNIT_DAYS[m.group(2)])
    try:
        if len(text) != 10:
            raise ValueError
        day = date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option} must be a day as YYYY-MM-DD or a span back from today (30d, 12w, 6m), "
                        f"not {value!r}", exit_code=2) from None
    if not 1970 <= day.year <= 9998:
        raise UserError(f"{option} {value!r} is outside the years 1970-9998", exit_code=2)
    return day
