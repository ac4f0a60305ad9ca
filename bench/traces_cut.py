"""Cut a trace benchmark from every labeled issue whose body holds an error log (not chosen by hand).

    .venv/bin/python bench/traces_cut.py          # writes bench/data/trace_bench.jsonl.gz

For every labeled issue (taxonomy/labels/*.jsonl joined with the corpus texts as classifier/dataset.load_gold
joins them; the labeler's summaries of outside issues, `source` "external", are left out: they are not the
issue's body) the error block is cut out of the body:

- a *segment* is a fenced code block (``` or ~~~, blockquote markers stripped, an unclosed fence runs to the
  end), or a run of consecutive log lines outside the fences: traceback headers and frames, lines starting with
  an exception type, lines with a log prefix (level and timestamp, `[rank0]:`, `(pid=..)`, `[TensorRT-LLM][ERROR]`,
  glog's `E0101 12:00:00`, llama.cpp's `function_name:`), signal and abort lines, `file.cpp:123:` lines, and
  inline code spans (`...`) that read as an error line;
- an *error line* has a traceback header, an exception type, `error`, `out of memory`/`OOM`, a signal
  (`SIGSEGV`, `Segmentation fault`, `core dumped`, `Bus error`, `Killed`, `Aborted`, `terminate called`) or
  `failed`/`failure`, and is not a line of source code (`import`, `def`, `except ...:`, `logger.error(...)`,
  comments, assignments: a reproduction script names errors without showing one);
- an *environment dump* is a segment that names `collect_env`/`check_env`/`nvidia-smi`/a pip or conda list, or
  whose lines are mostly environment lines (retriage/core/textprep.py's environment keys, `pkg==1.0` and
  `pkg  1.0` rows, nvidia-smi table rows), or that sits right under a heading or `<summary>` naming the
  environment and shows no exception. Of such a block only what follows its first traceback line (header, frame
  or exception line) is kept, without its environment lines, and only when it holds a traceback header or an
  exception line (a crashing `collect_env` run);
- the trace is every segment that holds an error line, in body order (a segment repeated verbatim once), capped
  at CAP_BYTES: error lines first (repeats that differ only in numbers once, each line at most MAX_LINE
  characters), then the lines nearest to them, in their order, with `[...]` where lines were left out.

An issue is in the benchmark when its trace is not empty. Each record: html_url, repo, number, engine,
created_at, split, re_class, component, known_fix, log_only_ok, fixture, text.

split (as `retriage eval` splits issues, classifier/splits.py): `test_trtllm` for every TensorRT-LLM issue (the
engine held out entirely); otherwise `train` when created before FUTURE_CUTOFF, `test_time` on or after it,
`undated` without a creation date (in neither side).

log_only_ok: whether the class can be told from the log alone, by an automatic criterion: for RE.1-RE.4, some
line of the trace (traceback frames aside: their paths name `distributed`, `cache` ...) matches one of that
class's keyword signals (taxonomy/keywords.toml, [re_class]); for `none`, some error line of the trace matches
no resource class's keyword signals (a failure that is not a resource failure is shown). A trace whose label
rests on what only the prose says (an OOM log labeled RE.4 because the reporter saw memory grow over hours)
is thus marked False.

fixture: a hand-picked trace of tests/data/traces (manifests, holdout included) was cut from this issue: its
rules were written from it.

Deterministic: the same labels and corpus give the same file, byte for byte (records in label order of
(repo, number); gzip without a time stamp). `load()` reads it (the bench scripts and the calibration read it
through this module).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from retriage.core.textprep import FRAME_RE, _is_env_line, strip_ansi  # noqa: E402

OUT = ROOT / "bench" / "data" / "trace_bench.jsonl.gz"
TRACES = ROOT / "tests" / "data" / "traces"
CAP_BYTES = 4096
MAX_LINE = 400
GAP = "[...]"
SPLITS = ("train", "test_time", "test_trtllm", "undated")

_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_QUOTE_RE = re.compile(r"^\s*>\s?")
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_HTML_TAG_LINE_RE = re.compile(r"^\s*(?:</?(?:details|summary|br|p|pre|code|div|sub|sup|b|i|img)\b[^>]*>\s*)+$", re.I)
_TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
# an exception line: a type name at the line's start (as triage/logtext.py reads it), optionally after a log prefix
_EXC_RE = re.compile(r"^\s*(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|AssertionError|KeyError|"
                     r"OutOfMemoryError)(?::|\s*$)")
_ERROR_RE = re.compile(
    r"(?i)\berror\b|[a-z](?-i:Error)\b|(?-i:Exception)\b|out of memory|\boom\b|\bfailed\b|\bfailure\b|"
    r"segmentation fault|core dumped|bus error|\bsig(?:segv|abrt|kill|bus|ill|fpe)\b|\bsignal \d+\b|"
    r"^\s*killed\s*$|\baborted\b|terminate called|illegal memory access|Traceback \(most recent call last\)")
# source code, not output: a reproduction script names errors without showing one
_CODE_RE = re.compile(
    r"^\s*(?:import\s+\w|from\s+[\w.]+\s+import\b|def\s+\w|class\s+\w+[(:]|if\s.*:\s*$|elif\b|else\s*:|for\s.*:\s*$|"
    r"while\s.*:\s*$|with\s.*:\s*$|try\s*:|except\b.*:\s*$|finally\s*:|raise\s+\w+\(|return\b|print\(|#(?!\d)|//|"
    r"\w+(?:\.\w+)*\.(?:error|warning|info|exception|debug)\(|[\w.\[\]'\"]+\s*(?:=|\+=)\s*[^=]|\)\s*$|[{}\[\]],?\s*$|"
    r"\"[\w-]+\"\s*:|assert\s)")
# log lines outside the fences
_LOG_PREFIX_RE = re.compile(
    r"^\s*(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b\s*(?:\d\d-\d\d\s|\[|:|\s-)|"
    r"\[?\d{4}-\d\d-\d\d[ T][\d:.,]+|\[rank\d+\]:|\((?:\w+\s*)?(?:rank=\d+ )?pid=\d+|\[TensorRT-LLM\]|"
    r"[EWIF]\d{4} \d\d:\d\d:\d\d|[a-z][a-z0-9]*_[a-z0-9_]+:\s|\S+\.(?:c|cc|cpp|cu|cuh|h|hpp|py):\d+:|"
    r"GGML_ASSERT|CUDA error|Segmentation fault|Aborted|Killed\s*$|terminate called|Fatal Python error|"
    r"Bus error|\*\*\* SIG|!!!!!!! Segfault)")
_INLINE_RE = re.compile(r"`([^`\n]*)`")  # spans paired left to right; those under 12 characters are left out
_ENV_MARK_RE = re.compile(
    r"(?i)collect_env|check_env|Collecting environment information|NVIDIA-SMI \d|Versions of relevant libraries|"
    r"^\s*Package\s+Version\s*$|^\s*PyTorch version\s*:|^\s*Is CUDA available\s*:|pip3? (?:list|freeze)|"
    r"conda list|^\s*#\s*Name\s+Version\s+Build", re.M)
_ENV_CONTEXT_RE = re.compile(
    r"(?i)collect_env|check_env|nvidia-smi|pip3? (?:list|freeze)|conda list|\benvironment\b|system info|"
    r"env(?:ironment)? info|^#+\s*(?:Your current environment|Environment|System Info)\s*$")
_SMI_ROW_RE = re.compile(r"^\s*[|+][-=+| ]|^\s*\|.*\|\s*$")
_PKG_ROW_RE = re.compile(r"^\s*[A-Za-z0-9_.\-\[\]]+\s*(?:==|@ file:|\s{2,})\s*[\w.+\-!:/]+(?:\s+\S+){0,3}\s*$")
_DIGITS_RE = re.compile(r"\d+")


# ---- segments -----------------------------------------------------------------------------------------------
def _unquote(line: str) -> str:
    return _QUOTE_RE.sub("", line, count=1)


def is_code(line: str) -> bool:
    return bool(_CODE_RE.match(line)) and not _EXC_RE.match(line)


def is_error_line(line: str) -> bool:
    if _EXC_RE.match(line) or _TRACEBACK_RE.search(line):
        return True
    return bool(_ERROR_RE.search(line)) and not is_code(line) and not FRAME_RE.match(line)


def _strong(lines: list[str]) -> bool:
    return any(_TRACEBACK_RE.search(x) or _EXC_RE.match(x) for x in lines)


def _env_row(line: str) -> bool:
    return _is_env_line(line) or bool(_SMI_ROW_RE.match(line) or _PKG_ROW_RE.match(line))


def _env_dump(lines: list[str], context: str) -> bool:
    body = [x for x in lines if x.strip()]
    if not body:
        return False
    if _ENV_MARK_RE.search("\n".join(body)):
        return True
    if len(body) >= 4 and sum(map(_env_row, body)) / len(body) > 0.3:
        return True
    return bool(_ENV_CONTEXT_RE.search(context)) and not _strong(body)


def segments(body: str) -> list[tuple[str, list[str]]]:
    """The body's segments in order: ("fence", lines) for each fenced block, ("log", lines) for each run of log
    lines outside the fences (inline error spans of a prose line included). Environment dumps already dropped
    (their non-environment remainder kept when it shows an exception)."""
    text = strip_ansi(_HTML_COMMENT_RE.sub("", (body or "").replace("\r\n", "\n").replace("\r", "\n")))
    lines = [_unquote(x) for x in text.split("\n")]
    out: list[tuple[str, list[str]]] = []
    run: list[str] = []
    context = ""  # the last prose line (heading, <summary>) before a fence
    blank = 0

    def flush() -> None:
        nonlocal run
        if run:
            out.append(("log", run))
        run = []

    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE_RE.match(line)
        if m:
            flush()
            fence = m.group(1)
            j, block = i + 1, []
            while j < len(lines):
                close = _FENCE_RE.match(lines[j])
                if (close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence)
                        and not close.group(2).strip()):
                    break
                block.append(lines[j].rstrip())
                j += 1
            if _env_dump(block, context + "\n" + m.group(2)):
                rest = [x for x in block if not _env_row(x)]
                start = next((k for k, x in enumerate(rest) if FRAME_RE.match(x) or _TRACEBACK_RE.search(x)
                              or _EXC_RE.match(x)), len(rest))
                block = rest[start:] if _strong(rest) else []
            if block:
                out.append(("fence", block))
            i, context, blank = j + 1, "", 0
            continue
        stripped = line.strip()
        if not stripped or _HTML_TAG_LINE_RE.match(line):
            if "summary" in line.lower():
                context = line
            blank += 1
            if blank > 1:
                flush()
            i += 1
            continue
        if "<summary>" in line.lower():  # <summary>The output of `python collect_env.py`</summary>
            context = line
            flush()
            i += 1
            continue
        whole = re.fullmatch(r"\s*(?:[-*+]\s+)?`([^`]+)`\s*", line)
        candidate = whole.group(1) if whole else line
        if (FRAME_RE.match(candidate) or _TRACEBACK_RE.search(candidate) or _EXC_RE.match(candidate)
                or _LOG_PREFIX_RE.match(candidate) or (run and candidate.startswith((" ", "\t")))):
            run.append(candidate.rstrip())
            blank = 0
        else:
            flush()
            context = line
            spans = [s.strip() for s in _INLINE_RE.findall(line)]
            spans = [s for s in spans if len(s) >= 12 and is_error_line(s) and not s.startswith("-")]
            if spans:
                out.append(("inline", spans))
            blank = 0
        i += 1
    flush()
    return out


def error_segments(body: str) -> list[list[str]]:
    """The segments that hold an error line, each once, in body order."""
    seen: set[str] = set()
    out = []
    for _kind, lines in segments(body):
        lines = [x for x in lines if x.strip()]
        key = "\n".join(lines)
        if key in seen or not any(is_error_line(x) for x in lines):
            continue
        seen.add(key)
        out.append(lines)
    return out


# ---- the cap ------------------------------------------------------------------------------------------------
def _size(lines: list[str]) -> int:
    return sum(len(x.encode("utf-8")) + 1 for x in lines)


def _assemble(lines: list[str], keep: set[int]) -> list[str]:
    out, last = [], -1
    for i in sorted(keep):
        if i != last + 1 and (out or i > 0):
            out.append(GAP)
        out.append(lines[i])
        last = i
    if out and last != len(lines) - 1:
        out.append(GAP)
    return out


def cap(lines: list[str], limit: int = CAP_BYTES) -> list[str]:
    """At most `limit` bytes of the lines: all of them when they fit; else the error lines first (exception lines,
    then the rest; a line repeated with other numbers once), then the lines nearest to them."""
    if _size(lines) <= limit:
        return lines
    lines = [x if len(x) <= MAX_LINE else x[:MAX_LINE] + " [...]" for x in lines]
    shapes: set[str] = set()
    errors: list[int] = []
    for group in (lambda x: bool(_EXC_RE.match(x) or _TRACEBACK_RE.search(x)), is_error_line):
        for i, x in enumerate(lines):
            shape = _DIGITS_RE.sub("0", x.strip())
            if i not in errors and shape not in shapes and group(x):
                shapes.add(shape)
                errors.append(i)
    keep: set[int] = set()
    for i in errors:
        if _size(_assemble(lines, keep | {i})) > limit:
            break
        keep.add(i)
    anchors = sorted(keep) or [len(lines) - 1]
    near = sorted((min(abs(i - a) for a in anchors), i) for i in range(len(lines)) if i not in keep)
    for _, i in near:
        shape = _DIGITS_RE.sub("0", lines[i].strip())
        if shape in shapes and not FRAME_RE.match(lines[i]):
            continue  # the same line from another rank
        if _size(_assemble(lines, keep | {i})) <= limit:
            keep.add(i)
            shapes.add(shape)
    return _assemble(lines, keep)


def cut(body: str, limit: int = CAP_BYTES) -> str:
    """The issue's error block as trace text ("" when the body holds no error log)."""
    segs = error_segments(body)
    if not segs:
        return ""
    lines: list[str] = []
    for s in segs:
        if lines:
            lines.append("")
        lines += s
    return "\n".join(cap(lines, limit))


# ---- can the class be told from the log alone? -------------------------------------------------------------------
def class_signals() -> dict[str, list[re.Pattern]]:
    from retriage.taxonomy import HERE

    with open(HERE / "keywords.toml", "rb") as f:
        kw = tomllib.load(f)["re_class"]
    return {c: [re.compile(p, re.I) for p in ps] for c, ps in kw.items()}


def log_only_ok(text: str, re_class: str, signals: dict[str, list[re.Pattern]] | None = None) -> bool:
    """Documented in the module's docstring: the class's keyword evidence is on some line (frames aside); for
    `none`, some error line carries no resource class's evidence."""
    signals = signals or class_signals()
    lines = [x for x in text.split("\n") if x.strip() and x != GAP and not FRAME_RE.match(x)]

    def hits(line: str, cls: str) -> bool:
        return any(p.search(line) for p in signals.get(cls, ()))

    if re_class == "none":
        return any(is_error_line(x) and not any(hits(x, c) for c in signals) for x in lines)
    return any(hits(x, re_class) for x in lines)


# ---- the benchmark --------------------------------------------------------------------------------------------
def split_of(engine: str, created_at: str) -> str:
    from retriage.classifier.splits import FUTURE_CUTOFF, HELD_OUT_ENGINE

    if engine == HELD_OUT_ENGINE:
        return "test_trtllm"
    if not created_at:
        return "undated"
    return "train" if created_at < FUTURE_CUTOFF else "test_time"


def fixture_sources() -> set[str]:
    """html_url of every issue a hand-picked trace (tests/data/traces, holdout included) was cut from."""
    out = set()
    for f in sorted(TRACES.rglob("manifest*.toml")):
        with open(f, "rb") as fh:
            out |= {t.get("source", "") for t in tomllib.load(fh).get("trace", [])}
    return out - {""}


def build(examples=None) -> list[dict]:
    from retriage.classifier.dataset import load_gold

    examples = load_gold() if examples is None else examples
    signals, fixtures = class_signals(), fixture_sources()
    out = []
    for e in sorted(examples, key=lambda e: (e.repo, e.number)):
        if e.source == "external":
            continue
        text = cut(e.body)
        if not text:
            continue
        out.append({"html_url": e.html_url, "repo": e.repo, "number": e.number, "engine": e.engine,
                    "created_at": e.created_at, "split": split_of(e.engine, e.created_at), "re_class": e.re_class,
                    "component": e.component, "known_fix": e.known_fix,
                    "log_only_ok": log_only_ok(text, e.re_class, signals), "fixture": e.html_url in fixtures,
                    "text": text})
    return out


def load(path: Path = OUT) -> list[dict]:
    """The benchmark's records (a .gz file is read through gzip)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def dump(records: list[dict], path: Path = OUT) -> None:
    """Write the records as JSON lines, gzipped (no time stamp: byte for byte the same) when the path ends in .gz."""
    from retriage.core.output import atomic_output

    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")
    with atomic_output(path, binary=True) as f:  # whole or not at all
        f.write(gzip.compress(text, mtime=0) if str(path).endswith(".gz") else text)


def main(argv: list[str]) -> None:
    from collections import Counter

    path = Path(argv[0]) if argv else OUT
    records = build()
    dump(records, path)
    by = Counter((r["split"], r["log_only_ok"]) for r in records)
    print(f"{len(records)} traces -> {path}: " + ", ".join(
        f"{s} {by[(s, True)] + by[(s, False)]} ({by[(s, True)]} log-only-ok)" for s in SPLITS))


if __name__ == "__main__":
    main(sys.argv[1:])
