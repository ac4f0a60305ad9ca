"""Component shares per engine over a period, beside the shares a study published (report/reference_shares.toml).

For each selected engine (every engine in the taxonomy when none is given): the issues created in since..until
(inclusive days, UTC; pull requests only with include_prs) that the model version labeled, counted per predicted
component, once over all labeled issues and once over the resource-class ones (RE.1-RE.4, not abstained). Shares
are of the labeled issues (of the resource ones). One GROUP BY in DuckDB.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import duckdb

from retriage import taxonomy
from retriage.report.query import _check_options, resolve_engines
from retriage.report.weekly import CURRENT_MODEL, _extra_categories

REFERENCE_FILE = Path(__file__).resolve().parent / "reference_shares.toml"


@dataclass(frozen=True)
class Reference:
    share: float
    source: str  # the source's title
    url: str
    detail: str = ""


@dataclass
class EngineShares:
    engine: str  # engine id
    name: str
    labeled: dict[str, int]  # component -> labeled issues
    resource: dict[str, int]  # component -> resource-class issues (RE.1-RE.4, not abstained)
    reference: dict[str, Reference]  # component -> the published share, where there is one
    unlabeled: int = 0

    @property
    def labeled_total(self) -> int:
        return sum(self.labeled.values())

    @property
    def resource_total(self) -> int:
        return sum(self.resource.values())

    def share(self, component: str, resource: bool = False) -> float | None:
        counts, total = (self.resource, self.resource_total) if resource else (self.labeled, self.labeled_total)
        return counts.get(component, 0) / total if total else None


@dataclass
class ComponentReport:
    components: list[str]
    model_version: str | None
    since: date | None
    until: date | None
    include_prs: bool
    engines: list[EngineShares]

    @property
    def labeled(self) -> int:
        return sum(e.labeled_total for e in self.engines)

    @property
    def issues(self) -> int:
        return self.labeled + sum(e.unlabeled for e in self.engines)


@lru_cache(maxsize=None)
def reference_shares() -> dict[tuple[str, str], Reference]:
    """(engine id, component) -> the published share, from report/reference_shares.toml."""
    with open(REFERENCE_FILE, "rb") as f:
        data = tomllib.load(f)
    sources = {s["id"]: s for s in data["source"]}
    return {(r["engine"], r["component"]): Reference(r["share"], sources[r["source"]]["title"],
                                                    sources[r["source"]]["url"], r.get("detail", ""))
            for r in data["share"]}


def component_shares(con: duckdb.DuckDBPyConnection, engines: Iterable[str] | None = None,
                     since: date | str | None = None, until: date | str | None = None,
                     model_version=CURRENT_MODEL, include_prs: bool = False) -> ComponentReport:
    """Per engine: labeled and resource-class issues per predicted component, with the published shares."""
    since_day, until_day = _check_options("component", since, until, None)
    if model_version is CURRENT_MODEL:
        from retriage.classifier import current_model_version

        model_version = current_model_version()
    selected = resolve_engines(engines) or taxonomy.engines()
    known = taxonomy.component_ids()
    components = known + _extra_categories(con, "component", model_version, known)
    where = ["i.created_at IS NOT NULL", "list_contains($repos, i.repo)"]
    if not include_prs:
        where.append("NOT i.is_pull_request")
    if since_day:
        where.append("i.created_at >= $since")
    if until_day:
        where.append("i.created_at < $until")
    params = {
        "map_repos": [r for e in selected for r in (e.repo, *e.former_repos)],
        "map_ids": [e.id for e in selected for _ in (e.repo, *e.former_repos)],
        "repos": [r for e in selected for r in (e.repo, *e.former_repos)],
        "model_version": model_version,
        "resource": taxonomy.resource_class_ids(),
    }
    if since_day:
        params["since"] = datetime.combine(since_day, datetime.min.time())
    if until_day:
        params["until"] = datetime.combine(until_day + timedelta(days=1), datetime.min.time())
    rows = con.execute(f"""
        WITH engine_map AS (SELECT unnest($map_repos) AS repo, unnest($map_ids) AS engine)
        SELECT m.engine, p.component, count(*) FILTER (WHERE p.repo IS NOT NULL) AS labeled,
               count(*) FILTER (WHERE NOT p.abstained AND list_contains($resource, p.re_class)) AS resource,
               count(*) FILTER (WHERE p.repo IS NULL) AS unlabeled
        FROM issues i JOIN engine_map m ON m.repo = i.repo
        LEFT JOIN predictions p ON p.repo = i.repo AND p.number = i.number AND p.model_version = $model_version
        WHERE {" AND ".join(where)}
        GROUP BY ALL""", params).fetchall()
    refs = reference_shares()
    out = []
    for e in selected:
        mine = [r for r in rows if r[0] == e.id]
        labeled = {c: sum(r[2] for r in mine if r[1] == c) for c in components}
        resource = {c: sum(r[3] for r in mine if r[1] == c) for c in components}
        reference = {c: refs[(e.id, c)] for c in components if (e.id, c) in refs}
        out.append(EngineShares(e.id, e.name, labeled, resource, reference, sum(r[4] for r in mine)))
    return ComponentReport(components, model_version, since_day, until_day, include_prs, out)
