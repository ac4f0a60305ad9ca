"""The engine version an issue was reported on, read from its body with the patterns of taxonomy/versions.toml,
normalised per engine (db/migrations/005 holds the rows), and the version filters of `list --version`.

    parse("vllm", body) -> [Version(engine="vllm", version="0.8.5", release="0.8", sort_key=8005.0,
                                    role="reported", source="vLLM Version: 0.8.5")]

Every issue gets exactly one row of role `reported` (version "unknown" when nothing is found); a regression report
("worked on 0.8.4, broken on 0.8.5") adds one row of role `good` and one of role `bad`. `release_key(engine,
release)` orders an engine's releases (main and unknown last).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache

from retriage.taxonomy import HERE, engine_for_repo

SOURCE_CHARS = 200
MAIN, UNKNOWN = "main", "unknown"
_LAST = {MAIN: 1e12, UNKNOWN: 2e12}  # sort keys of main and unknown: after every release
_SEMVER = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+)(?:\.(\d{1,2})(?!\d))?)?((?:[.\-]?(?:post|dev|rc|a|b)\d*)*)", re.I)
_SUFFIX = re.compile(r"(post|dev|rc|a|b)(\d*)", re.I)
_BUILD = re.compile(r"b?(\d{1,6})", re.I)
_RELEASE_RANGE = re.compile(r"b(\d+)-b(\d+)")


@dataclass(frozen=True)
class Version:
    engine: str        # the stored engine name: vllm, sglang, llama.cpp, tensorrt-llm
    version: str       # normalised: 0.8.5, 0.6.4.dev12, b5432, main, unknown
    release: str       # 0.8 / b5000-b5499 / main / unknown
    sort_key: float
    role: str          # reported | good | bad
    source: str        # the line it was read from, at most SOURCE_CHARS characters


@dataclass(frozen=True)
class _Engine:
    id: str
    stored: str
    scheme: str
    build_range: int
    patterns: tuple[tuple[str, re.Pattern], ...]


@lru_cache(maxsize=1)
def _data() -> dict:
    with open(HERE / "versions.toml", "rb") as f:
        return tomllib.load(f)


@lru_cache(maxsize=None)
def _engine(engine_id: str) -> _Engine | None:
    data = _data()
    e = data["engine"].get(engine_id)
    if e is None:
        return None
    tokens = {k: f"(?:{v})" for k, v in data["tokens"].items()} | {"NAMES": e["names"]}
    patterns = []
    for p in data["pattern"]:
        if engine_id in p["engines"]:
            regex = re.sub(r"\{([A-Z]+)\}", lambda m: tokens[m.group(1)], p["regex"])
            patterns.append((p["name"], re.compile(regex, re.M)))
    return _Engine(engine_id, e["stored"], e["scheme"], int(e.get("build_range", 500)), tuple(patterns))


def engine_ids() -> list[str]:
    """The taxonomy ids of the engines whose versions are read."""
    return list(_data()["engine"])


def _by_stored(stored: str) -> _Engine | None:
    return next((e for e in map(_engine, engine_ids()) if e and e.stored == stored), None)


def engine_id(stored: str) -> str | None:
    """The taxonomy id of a stored engine name (tensorrt-llm -> trtllm)."""
    e = _by_stored(stored)
    return e.id if e else None


def normalise(engine: str, raw: str) -> tuple[str, str, float] | None:
    """(version, release, sort_key) of a version string of `engine` (a taxonomy id or a stored name); None when
    it is not a version of that engine's scheme."""
    e = _engine(engine) or _by_stored(engine)
    raw = raw.strip()
    if e is None or not raw:
        return None
    if raw.lower() in _LAST:
        return raw.lower(), raw.lower(), _LAST[raw.lower()]
    if e.scheme == "build":
        m = _BUILD.fullmatch(raw)
        if not m or int(m.group(1)) == 0:
            return None
        n = int(m.group(1))
        lo = n // e.build_range * e.build_range
        return f"b{n}", f"b{lo}-b{lo + e.build_range - 1}", float(n)
    m = _SEMVER.match(raw.split("+")[0])
    if not m:
        return None
    major, minor, patch, fourth = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    suffix = m.group(5).lower().replace("-", ".")
    if re.fullmatch(r"[.\-]?(?:a|b)\d*", suffix):  # "0.8.5b" is not a version we know
        suffix = ""
    key = major * 1e6 + minor * 1e3 + (int(patch) if patch else 0) + (min(int(fourth), 9) * 0.05 if fourth else 0)
    for kind, n in _SUFFIX.findall(suffix):
        key += (0.25 + min(int(n or 0), 99) * 0.001) if kind == "post" else -(0.5 - min(int(n or 0), 999) * 0.0001)
    text = f"{major}.{minor}" + (f".{patch}" if patch else "") + (f".{fourth}" if fourth else "") + suffix
    return text, f"{major}.{minor}", key


def release_key(engine: str, release: str) -> float:
    """Where a release (0.8, b5000-b5499, main, unknown) sorts among the engine's releases: the key of its first
    version. Releases of one engine sort by it; main and unknown come last."""
    if release in _LAST:
        return _LAST[release]
    m = _RELEASE_RANGE.fullmatch(release)
    if m:
        return float(m.group(1))
    n = normalise(engine, release)
    return n[2] if n else _LAST[UNKNOWN]


def _line(text: str, start: int) -> str:
    a = text.rfind("\n", 0, start) + 1
    b = text.find("\n", start)
    return " ".join(text[a:b if b >= 0 else len(text)].split())[:SOURCE_CHARS]


def _row(e: _Engine, raw: str, role: str, text: str, at: int) -> Version | None:
    n = normalise(e.id, raw)
    return Version(e.stored, n[0], n[1], n[2], role, _line(text, at)) if n else None


def parse(engine_id: str, text: str | None) -> list[Version]:
    """The versions of the engine `engine_id` (a taxonomy id) in an issue's text: one `reported` row (unknown
    when nothing matched), plus `good` and `bad` rows when the reporter names the version it worked on and the
    one it broke on. [] for an engine whose versions are not read."""
    e = _engine(engine_id)
    if e is None:
        return []
    text = text or ""
    reported: Version | None = None
    regression: list[Version] = []
    for _name, rx in e.patterns:
        for m in rx.finditer(text):
            groups = m.groupdict()
            if "good" in groups:
                if regression:
                    break
                good = _row(e, groups["good"], "good", text, m.start("good"))
                bad = _row(e, groups["bad"], "bad", text, m.start("bad"))
                if good and bad and good.version != bad.version:
                    regression = [good, bad]
                    break
            elif reported is None:
                raw = groups["v"] if "v" in groups else MAIN
                reported = _row(e, raw, "reported", text, m.start("v") if "v" in groups else m.start())
                if reported:
                    break
        if reported is not None and regression:
            break
    if reported is None:
        reported = replace(regression[1], role="reported") if regression else Version(
            e.stored, UNKNOWN, UNKNOWN, _LAST[UNKNOWN], "reported", "")
    return [reported, *regression]


def parse_issue(repo: str, text: str | None) -> list[Version]:
    """`parse` for an issue of `repo` (its engine from taxonomy/engines.toml); [] for a repository of no engine."""
    e = engine_for_repo(repo)
    return parse(e.id, text) if e else []


# --- `list --version`: a release, an exact version or a range ------------------------------------------------


@dataclass(frozen=True)
class VersionFilter:
    """What `--version` asks for: `value` (a release or an exact version, any engine) or a range of sort keys
    per scheme (`lo`..`hi`, both inclusive), for the engines of `scheme`."""
    text: str
    value: str | None = None
    scheme: str | None = None
    lo: float = 0.0
    hi: float = 0.0

    def engines(self) -> list[str]:
        """The stored engine names a range applies to (every engine for a value)."""
        return [e.stored for e in map(_engine, engine_ids()) if e and (self.scheme is None or e.scheme == self.scheme)]


def _scheme_of(text: str) -> str | None:
    if re.fullmatch(r"b\d{1,6}", text, re.I) or re.fullmatch(r"\d{3,6}", text):
        return "build"
    if _SEMVER.fullmatch(text):
        return "semver"
    return None


def _bound(text: str, scheme: str, upper: bool) -> float:
    """A range end's sort key: a release (0.8) covers all its versions (0.8.0 .. 0.8.x), a build is itself."""
    engine = next(e for e in map(_engine, engine_ids()) if e and e.scheme == scheme)
    _, _, key = normalise(engine.id, text)
    if scheme == "semver" and upper and text.lstrip("v").count(".") == 1:
        key += 999.9
    if scheme == "semver" and not upper and text.lstrip("v").count(".") == 1:
        key -= 0.5
    return key


def parse_filter(text: str | None) -> VersionFilter | None:
    """`--version` as given: 0.26 (a release), 0.26.0 (an exact version), b5432, b5000-b5499, main, unknown, or a
    range LO..HI of one scheme (0.8..0.9, b7600..b7700). Raises ValueError with a one-line reason."""
    if text is None:
        return None
    t = text.strip()
    if not t:
        raise ValueError("give a version: 0.26, 0.26.0, b5432, main, unknown, or a range such as b7600..b7700")
    if ".." in t:
        lo, _, hi = t.partition("..")
        s_lo, s_hi = _scheme_of(lo.strip()), _scheme_of(hi.strip())
        if s_lo is None or s_lo != s_hi:
            raise ValueError(f"{text!r} is not a range of versions of one kind (e.g. 0.8..0.9 or b7600..b7700)")
        a, b = _bound(lo.strip(), s_lo, False), _bound(hi.strip(), s_lo, True)
        if a > b:
            raise ValueError(f"{text!r}: the range's start is after its end")
        return VersionFilter(t, scheme=s_lo, lo=a, hi=b)
    low = t.lower()
    if low in _LAST or _RELEASE_RANGE.fullmatch(low):
        return VersionFilter(t, value=low)
    scheme = _scheme_of(t)
    if scheme is None:
        raise ValueError(f"{text!r} is not a version: give 0.26, 0.26.0, b5432, main, unknown or LO..HI")
    engine = next(e for e in map(_engine, engine_ids()) if e and e.scheme == scheme)
    return VersionFilter(t, value=normalise(engine.id, t)[0])
