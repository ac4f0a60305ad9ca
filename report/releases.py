"""Per engine and release: each RE class's count and share with a 95 % Wilson interval, beside the engine's share
over its earlier releases, and the releases whose share is clearly above that (the counting rules: report/README.md).

The version of each issue comes from table issue_versions (db/migrations/005), its class from the label in force:
the newest correction (`retriage relabel`), else the team's label (gold_labels), else the prediction of the model
version (abstained: `unsure`; none: `unlabeled`). An issue with a `good` and a `bad` version is a regression
report: it counts apart, under the release of its `bad` version. All counting is one DuckDB GROUP BY; Python
adds up the earlier releases and computes the intervals from the aggregated rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import duckdb

from retriage import taxonomy
from retriage.report.query import UNLABELED, UNSURE, resolve_engines
from retriage.report.weekly import CURRENT_MODEL

Z = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
RESOURCE = "resource"  # RE.1-RE.4 together
UNORDERED = ("main", "unknown")  # releases outside the engine's order: shown, never compared
TEST = ("Newcombe's hybrid score interval (95 %) for the release's share minus the share over the engine's earlier "
        "releases; flagged when its lower end is above zero")


def wilson(k: int, n: int, z: float = Z) -> tuple[float, float] | None:
    """Wilson score interval of k successes in n trials; None when n is 0."""
    if n <= 0:
        return None
    p, z2 = k / n, z * z
    centre, half = (p + z2 / (2 * n)) / (1 + z2 / n), z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float] | None:
    """p1 - p2 with Newcombe's hybrid score interval (method 10, from the two Wilson intervals); None when a
    sample is empty."""
    a, b = wilson(k1, n1), wilson(k2, n2)
    if a is None or b is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    return d, d - math.hypot(p1 - a[0], b[1] - p2), d + math.hypot(a[1] - p1, p2 - b[0])


@dataclass(frozen=True)
class Share:
    count: int
    n: int  # labeled issues (a class other than unsure/unlabeled)

    @property
    def share(self) -> float | None:
        return self.count / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.count, self.n)


@dataclass(frozen=True)
class Flag:
    what: str  # "resource" or a class id
    share: Share
    before: Share
    difference: float
    low: float
    high: float


@dataclass
class Release:
    release: str  # 0.25, b5000-b5499, main, unknown
    sort_key: float
    counts: dict[str, int]  # class id, unsure, unlabeled -> issues reported on this release
    regressions: dict[str, int] = field(default_factory=dict)  # the same for regression reports broken here
    before: dict[str, int] | None = None  # counts over the engine's earlier releases (None: not compared)
    flags: list[Flag] = field(default_factory=list)

    @property
    def ordered(self) -> bool:
        return self.release not in UNORDERED

    @property
    def issues(self) -> int:
        return sum(self.counts.values())

    @staticmethod
    def _share(counts: dict[str, int], what: str) -> Share:
        n = sum(v for c, v in counts.items() if c not in (UNSURE, UNLABELED))
        wanted = taxonomy.resource_class_ids() if what == RESOURCE else [what]
        return Share(sum(counts.get(c, 0) for c in wanted), n)

    def share(self, what: str) -> Share:
        return self._share(self.counts, what)

    def before_share(self, what: str) -> Share | None:
        return None if self.before is None else self._share(self.before, what)

    @property
    def labeled(self) -> int:
        return self.share(RESOURCE).n


@dataclass
class EngineReleases:
    engine: str
    name: str
    releases: list[Release]

    @property
    def issues(self) -> int:
        return sum(r.issues for r in self.releases)

    @property
    def regressions(self) -> int:
        return sum(sum(r.regressions.values()) for r in self.releases)


@dataclass
class ReleaseReport:
    model_version: str | None
    classes: list[str]  # the taxonomy's RE classes, then unsure and unlabeled
    engines: list[EngineReleases]
    test: str = TEST

    @property
    def issues(self) -> int:
        return sum(e.issues + e.regressions for e in self.engines)

    @property
    def flags(self) -> list[tuple[EngineReleases, Release, Flag]]:
        return [(e, r, f) for e in self.engines for r in e.releases for f in r.flags]


def _has_versions(con: duckdb.DuckDBPyConnection) -> bool:
    """A database of a schema before version 5, opened read-only (not migrated), has no issue_versions."""
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'issue_versions'"
                       ).fetchone()[0] > 0


SQL = """
    WITH engine_map AS (SELECT unnest($map_repos) AS repo, unnest($map_ids) AS engine)
    SELECT m.engine, v.release, min(v.sort_key), v.role = 'bad' AS regression,
           coalesce(c.re_class, g.re_class, CASE WHEN p.abstained THEN 'unsure' ELSE p.re_class END,
                    'unlabeled') AS cls, count(*) AS n
    FROM issue_versions v  -- the one counted row per issue (db/versions.mark_counted): a regression report's bad
                           -- version, else the reported one
    JOIN engine_map m ON m.repo = v.repo
    LEFT JOIN (SELECT repo, number, re_class FROM corrections
               QUALIFY row_number() OVER (PARTITION BY repo, number ORDER BY corrected_at DESC) = 1) c
           ON c.repo = v.repo AND c.number = v.number
    LEFT JOIN gold_labels g ON g.repo = v.repo AND g.number = v.number
    LEFT JOIN predictions p ON p.repo = v.repo AND p.number = v.number AND p.model_version = $model_version
    WHERE v.counted  -- pull requests: an anti-join with the few of them, not a join with every issue
      AND ($include_prs OR (v.repo, v.number) NOT IN (SELECT repo, number FROM issues WHERE is_pull_request))
    GROUP BY ALL"""


def _flags(r: Release, wanted: list[str]) -> list[Flag]:
    out = []
    for what in wanted:
        share, before = r.share(what), r.before_share(what)
        d = newcombe(share.count, share.n, before.count, before.n) if before else None
        if d is not None and d[1] > 0:
            out.append(Flag(what, share, before, *d))
    return out


def release_report(con: duckdb.DuckDBPyConnection, engines: Iterable[str] | None = None,
                   model_version=CURRENT_MODEL, include_prs: bool = False) -> ReleaseReport:
    """Per selected engine (every engine of the taxonomy when none is given), its releases in order (main and
    unknown last), each with its counts, the counts over the earlier releases and its flags (TEST)."""
    if model_version is CURRENT_MODEL:
        from retriage.classifier import current_model_version

        model_version = current_model_version()
    selected = resolve_engines(engines) or taxonomy.engines()
    classes = taxonomy.re_class_ids() + [UNSURE, UNLABELED]
    rows = []
    if _has_versions(con):
        rows = con.execute(SQL, {
            "map_repos": [r for e in selected for r in (e.repo, *e.former_repos)],
            "map_ids": [e.id for e in selected for _ in (e.repo, *e.former_repos)],
            "model_version": model_version, "include_prs": include_prs}).fetchall()
    wanted = [RESOURCE, *taxonomy.resource_class_ids()]
    out = []
    for e in selected:
        releases: dict[str, Release] = {}
        for engine, release, key, regression, cls, n in rows:
            if engine != e.id:
                continue
            r = releases.setdefault(release, Release(release, key, dict.fromkeys(classes, 0)))
            r.sort_key = min(r.sort_key, key)
            target = r.regressions if regression else r.counts
            target[cls] = target.get(cls, 0) + n
        ordered = sorted(releases.values(), key=lambda r: (not r.ordered, r.sort_key, r.release))
        before = dict.fromkeys(classes, 0)
        for r in ordered:
            if not r.ordered:
                continue
            r.before = dict(before)
            r.flags = _flags(r, wanted)
            before = {c: before[c] + r.counts[c] for c in classes}
        out.append(EngineReleases(e.id, e.name, ordered))
    return ReleaseReport(model_version, classes, out)
