"""Days as users type them: `2025-01-31`, or relative to today (UTC): `30d`, `12w`, `6m` (months of 30 days)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

from retriage.core.errors import UserError

_RELATIVE = re.compile(r"^([0-9]{1,4})([dwm])$")
FIRST_YEAR, LAST_YEAR = 1970, 9998  # a day's week and the day after it stay inside Python's dates
_UNIT_DAYS = {"d": 1, "w": 7, "m": 30}


def parse_day(value: str | None, option: str, today: date | None = None) -> date | None:
    """The day `value` names, or None for None/''. A bad value is a one-line UserError naming the option."""
    if value is None or not value.strip():
        return None
    text = value.strip().lower()
    m = _RELATIVE.match(text)
    if m:
        today = today or datetime.now(timezone.utc).date()
        try:
            day = today - timedelta(days=int(m.group(1)) * _UNIT_DAYS[m.group(2)])
        except OverflowError:
            day = date.min
        return check_year(day, option, value)
    try:
        if len(text) != 10:
            raise ValueError
        day = date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option} must be a day as YYYY-MM-DD or a span back from today (30d, 12w, 6m), "
                        f"not {value!r}", exit_code=2) from None
    return check_year(day, option, value)


def check_year(day: date, option: str, value) -> date:
    """`day`, or a one-line UserError when it lies outside FIRST_YEAR..LAST_YEAR."""
    if not FIRST_YEAR <= day.year <= LAST_YEAR:
        raise UserError(f"{option} {value!r} is outside the years {FIRST_YEAR}-{LAST_YEAR}", exit_code=2)
    return day
