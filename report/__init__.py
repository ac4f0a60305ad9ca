"""Reports over the store. `weekly_report` computes the weekly distribution, `print_weekly` prints it to a Rich
console (used by `retriage demo`), report.render writes table/CSV/JSON/chart. Exported lazily so that importing
the CLI does not load DuckDB or Rich before a command needs them."""

_EXPORTS = {"weekly_report": "weekly", "WeeklyReport": "weekly", "print_weekly": "render"}


def __getattr__(name: str):
    if name in _EXPORTS:
        from importlib import import_module

        return getattr(import_module(f"retriage.report.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'retriage.report' has no attribute {name!r}")
