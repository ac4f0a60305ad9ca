"""Hostile input, table-driven, through the real CLI entry point (`retriage.cli.main`, in-process): every case
ends as one line on stderr starting `retriage: error:`, exit code 1 or 2, no traceback, never "internal error";
a failed `import` into a new database path leaves no file behind.

Each case is (id, argv, files): `files` maps a name in the test's folder to its bytes (or to a setup word:
"fifo", "dir", "chardev", "symlink-to-dir"); argv items may name `{tmp}` (that folder), `{db}` (a small labeled
database shared by the module) and `{new}` (a database path that does not exist yet)."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
from datetime import datetime
from pathlib import Path

import pytest

from retriage.core.errors import UserError

GOOD = {"repo": "vllm-project/vllm", "number": 5, "title": "CUDA out of memory", "body": "torch.OutOfMemoryError",
        "state": "open", "created_at": "2025-01-02T03:04:05Z", "updated_at": "2025-01-03T00:00:00Z"}


def jl(*records) -> bytes:
    """JSON lines of GOOD updated with each record's fields (a field set to ... is removed)."""
    out = []
    for r in records:
        rec = dict(GOOD)
        for k, v in r.items():
            if v is ...:
                rec.pop(k, None)
            else:
                rec[k] = v
        out.append(json.dumps(rec))
    return ("\n".join(out) + "\n").encode()


def raw_line(fragment: str) -> bytes:
    """One record written by hand: `fragment` pasted into GOOD's JSON (for what json.dumps cannot write)."""
    return (json.dumps(GOOD)[:-1] + ", " + fragment + "}\n").encode()


NESTED_ARRAY = b"[" * 100_000 + b"]" * 100_000
NESTED_OBJECT = (b'{"a":' * 50_000) + b"1" + b"}" * 50_000
NESTED_IN_BODY = raw_line('"extra": ' + "[" * 50_000 + "]" * 50_000)
BIG_DIGITS = raw_line('"number": ' + "7" * 5001)
SURROGATE_TITLE = raw_line('"title": "bad \\ud800 title"').replace(b'"title": "CUDA out of memory", ', b"")

# Bad issue records: what `import` and `predict -i` read. (id, file bytes)
BAD_RECORDS = [
    ("nested-array", NESTED_ARRAY),
    ("nested-object", NESTED_OBJECT),
    ("nested-in-a-field", NESTED_IN_BODY),
    ("number-2^40", jl({"number": 1099511627776})),
    ("number-2^31", jl({"number": 2147483648})),
    ("number-2^63", jl({"number": 2 ** 63})),
    ("number-superscript", jl({"number": "²"})),
    ("number-arabic-indic", jl({"number": "٣"})),
    ("number-fullwidth", jl({"number": "１２"})),
    ("number-5001-digits", BIG_DIGITS),
    ("number-5001-digit-string", jl({"number": "9" * 5001})),
    ("number-float", jl({"number": 1.5})),
    ("number-exponent", jl({"number": 1e3})),
    ("number-NaN", raw_line('"number": NaN')),
    ("number-Infinity", raw_line('"number": -Infinity')),
    ("number-zero", jl({"number": 0})),
    ("number-negative", jl({"number": -3})),
    ("number-true", jl({"number": True})),
    ("number-missing", jl({"number": ...})),
    ("number-list", jl({"number": [5]})),
    ("number-spaces", jl({"number": " 5"})),
    ("created-year-1-plus-14", jl({"created_at": "0001-01-01T00:00:00+14:00"})),
    ("created-year-9999-minus-14", jl({"created_at": "9999-12-31T23:59:59-14:00"})),
    ("updated-year-1-plus-14", jl({"updated_at": "0001-01-01T05:00:00+14:00"})),
    ("closed-year-9999-minus-14", jl({"closed_at": "9999-12-31T20:00:00-14:00"})),
    ("created-month-13", jl({"created_at": "2025-13-01T00:00:00Z"})),
    ("created-offset-25h", jl({"created_at": "2025-01-01T00:00:00+25:00"})),
    ("created-number", jl({"created_at": 1735689600})),
    ("created-garbage", jl({"created_at": "yesterday"})),
    ("created-list", jl({"created_at": ["2025-01-01"]})),
    ("title-lone-surrogate", SURROGATE_TITLE),
    ("body-lone-surrogate", raw_line('"extra_body": 1').replace(b'"body": "torch.OutOfMemoryError"',
                                                                 b'"body": "x \\udfff y"')),
    ("label-lone-surrogate", raw_line('"labels": ["\\udc00"]')),
    ("author-lone-surrogate", raw_line('"user": {"login": "\\ud83d"}')),
    ("repo-lone-surrogate", jl({"repo": ...}).replace(b"}\n", b', "repo": "a/\\ud800b"}\n')),
    ("title-list", jl({"title": ["x"]})),
    ("body-number", jl({"body": 5})),
    ("state-merged", jl({"state": "merged"})),
    ("state-number", jl({"state": 1})),
    ("labels-dict", jl({"labels": {"name": "bug"}})),
    ("labels-of-numbers", jl({"labels": [1, 2]})),
    ("label-name-number", jl({"labels": [{"name": 5}]})),
    ("user-login-number", jl({"user": {"login": 5}})),
    ("user-login-list", jl({"user": {"login": ["a"]}})),
    ("author-number", jl({"author": 7})),
    ("association-list", jl({"author_association": ["OWNER"]})),
    ("comments-2^40", jl({"comments": 1099511627776})),
    ("comments-negative", jl({"comments": -1})),
    ("comments-text", jl({"comments": "many"})),
    ("html-url-number", jl({"html_url": 5})),
    ("no-repo", jl({"repo": ...})),
    ("repo-number", jl({"repo": 5})),
    ("record-is-number", b"5\n"),
    ("record-is-null", b"null\n"),
    ("record-is-string", b'"issue"\n'),
    ("array-of-numbers", b"[1, 2, 3]"),
    ("items-of-numbers", b'{"items": [1, 2]}'),
    ("second-line-broken", jl({}) + b'{"repo": "vllm-project/vllm", "number": \n'),
    ("truncated-array", b'[{"repo": "vllm-project/vllm", "number": 1}'),
    ("trailing-garbage", b'[{"repo": "vllm-project/vllm", "number": 1}] garbage'),
    ("empty-file", b""),
    ("only-whitespace", b"  \n\n\t\n"),
    ("nul-bytes", b"\x00" * 4096),
    ("nul-in-json", jl({}).replace(b"{", b"{\x00", 1)),
    ("not-utf8", b'{"repo": "vllm-project/vllm", "number": 1, "title": "\xff\xfe"}\n'),
    ("utf16", json.dumps(GOOD).encode("utf-16")),
    ("random-bytes", bytes(range(256)) * 64),
    ("gzip-truncated", gzip.compress(jl({}) * 200)[:60]),
    ("gzip-of-garbage", gzip.compress(b"\xff\xfe\x00 not json")),
    ("gzip-trailing-junk", gzip.compress(jl({})) + b"junk"),
    ("gzip-of-nested", gzip.compress(NESTED_ARRAY)),
    ("gzip-of-nul", gzip.compress(b"\x00" * 2_000_000)),
]

# Bad gold-label lines: what `eval --gold` reads.
GOLD = {"repo": "vllm-project/vllm", "number": 5, "title": "t", "body": "b", "re_class": "RE.1",
        "component": "engine_setup"}


def gold(**changes) -> bytes:
    rec = dict(GOLD)
    for k, v in changes.items():
        if v is ...:
            rec.pop(k)
        else:
            rec[k] = v
    return (json.dumps(rec) + "\n").encode()


BAD_GOLD = [
    ("gold-nested", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("gold-number-2^40", gold(number=1099511627776)),
    ("gold-number-superscript", gold(number="²")),
    ("gold-number-5001-digits", (json.dumps(GOLD)[:-1] + ', "number": ' + "7" * 5001 + "}\n").encode()),
    ("gold-number-negative", gold(number=-1)),
    ("gold-number-float", gold(number=2.5)),
    ("gold-repo-number", gold(repo=5)),
    ("gold-repo-list", gold(repo=["a/b"])),
    ("gold-no-repo", gold(repo=...)),
    ("gold-bad-class", gold(re_class="RE.9")),
    ("gold-bad-component", gold(component="gpu")),
    ("gold-class-list", gold(re_class=["RE.1"])),
    ("gold-title-number", gold(title=5)),
    ("gold-lone-surrogate", (json.dumps(GOLD)[:-1] + ', "title": "a \\ud800"}\n').encode()),
    ("gold-is-list", b"[1, 2]\n"),
    ("gold-empty", b""),
    ("gold-not-utf8", b"\xff\xfe\xfd\n"),
    ("gold-nul", b"\x00" * 1000),
]


def _cases():
    out = []
    for name, data in BAD_RECORDS:
        out.append((f"import-{name}", ["import", "{tmp}/in.jsonl", "--db", "{new}"], {"in.jsonl": data}))
    for name, data in BAD_RECORDS[::3]:  # predict -i reads the same records
        out.append((f"predict-{name}", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/out.jsonl"],
                    {"in.jsonl": data}))
    for name, data in BAD_GOLD:
        out.append((f"eval-{name}", ["eval", "--gold", "{tmp}/gold.jsonl", "--dev-only"], {"gold.jsonl": data}))
    good = jl({})
    out += [
        ("import-no-such-file", ["import", "{tmp}/missing.jsonl", "--db", "{new}"], {}),
        ("import-a-folder", ["import", "{tmp}/d", "--db", "{new}"], {"d": "dir"}),
        ("import-dev-zero", ["import", "/dev/zero", "--db", "{new}"], {}),
        ("import-dev-null", ["import", "/dev/null", "--db", "{new}"], {}),
        ("import-dev-urandom", ["import", "/dev/urandom", "--db", "{new}"], {}),
        ("import-good-then-bad", ["import", "{tmp}/a.jsonl", "{tmp}/b.jsonl", "--db", "{new}"],
         {"a.jsonl": good, "b.jsonl": jl({"number": 1099511627776})}),
        ("import-db-is-a-folder", ["import", "{tmp}/a.jsonl", "--db", "{tmp}/d"], {"a.jsonl": good, "d": "dir"}),
        ("import-db-is-text", ["import", "{tmp}/a.jsonl", "--db", "{tmp}/t.duckdb"],
         {"a.jsonl": good, "t.duckdb": b"this is not a database\n" * 100}),
        ("import-db-in-missing-folder", ["import", "{tmp}/a.jsonl", "--db", "{tmp}/no/such/x.duckdb"],
         {"a.jsonl": good}),
        ("import-db-unwritable-folder", ["import", "{tmp}/a.jsonl", "--db", "/sys/retriage-test.duckdb"],
         {"a.jsonl": good}),
        ("import-no-files", ["import", "--db", "{new}"], {}),
        ("predict-no-such-input", ["predict", "-i", "{tmp}/missing.jsonl", "-o", "{tmp}/out.jsonl"], {}),
        ("predict-input-folder", ["predict", "-i", "{tmp}/d", "-o", "{tmp}/out.jsonl"], {"d": "dir"}),
        ("predict-input-dev-zero", ["predict", "-i", "/dev/zero", "-o", "{tmp}/out.jsonl"], {}),
        ("predict-output-folder", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/d"], {"in.jsonl": good, "d": "dir"}),
        ("predict-output-dot", ["predict", "-i", "{tmp}/in.jsonl", "-o", "."], {"in.jsonl": good}),
        ("predict-output-missing-folder", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/no/out.jsonl"],
         {"in.jsonl": good}),
        ("predict-output-unwritable", ["predict", "-i", "{tmp}/in.jsonl", "-o", "/sys/out.jsonl"],
         {"in.jsonl": good}),
        ("predict-output-fifo", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/fifo"],
         {"in.jsonl": good, "fifo": "fifo"}),
        ("predict-output-device", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/full"],
         {"in.jsonl": good, "full": "chardev"}),
        ("predict-output-symlink-to-folder", ["predict", "-i", "{tmp}/in.jsonl", "-o", "{tmp}/link"],
         {"in.jsonl": good, "link": "symlink-to-dir"}),
        ("classify-no-such-file", ["classify", "{tmp}/missing.log"], {}),
        ("classify-a-folder", ["classify", "{tmp}/d"], {"d": "dir"}),
        ("classify-dev-zero", ["classify", "/dev/zero"], {}),
        ("classify-dev-null", ["classify", "/dev/null"], {}),
        ("classify-empty", ["classify", "{tmp}/e.log"], {"e.log": b""}),
        ("classify-whitespace", ["classify", "{tmp}/e.log"], {"e.log": b"\n \n\t\r\n"}),
        ("classify-binary", ["classify", "{tmp}/b.log"], {"b.log": bytes(range(256)) * 40}),
        ("classify-nul", ["classify", "{tmp}/b.log"], {"b.log": b"\x00" * 500_000}),
        ("classify-bad-engine", ["classify", "--engine", "tgi", "{tmp}/t.log"],
         {"t.log": b"torch.OutOfMemoryError: CUDA out of memory\n"}),
        ("classify-similar-text", ["classify", "--similar", "many", "{tmp}/t.log"], {"t.log": b"x\n"}),
        ("classify-no-such-option", ["classify", "--frob", "{tmp}/t.log"], {"t.log": b"x\n"}),
        ("report-until-9999-12-31", ["report", "--until", "9999-12-31", "--db", "{db}"], {}),
        ("report-since-0001-01-01", ["report", "--since", "0001-01-01", "--db", "{db}"], {}),
        ("report-since-0001-01-01-until", ["report", "--since", "0001-01-01", "--until", "0001-01-07",
                                           "--db", "{db}"], {}),
        ("report-since-feb-30", ["report", "--since", "2025-02-30", "--db", "{db}"], {}),
        ("report-until-words", ["report", "--until", "yesterday", "--db", "{db}"], {}),
        ("report-since-after-until", ["report", "--since", "2025-03-01", "--until", "2025-02-01", "--db", "{db}"], {}),
        ("report-weeks-zero", ["report", "--weeks", "0", "--db", "{db}"], {}),
        ("report-weeks-huge", ["report", "--weeks", str(10 ** 20), "--db", "{db}"], {}),
        ("report-weeks-2^40", ["report", "--weeks", str(2 ** 40), "--db", "{db}"], {}),
        ("report-bad-format", ["report", "--format", "xlsx", "--db", "{db}"], {}),
        ("report-bad-by", ["report", "--by", "label", "--db", "{db}"], {}),
        ("report-bad-engine", ["report", "--engine", "tgi", "--db", "{db}"], {}),
        ("report-output-unwritable", ["report", "--format", "csv", "-o", "/sys/r.csv", "--db", "{db}"], {}),
        ("report-output-proc", ["report", "--format", "json", "-o", "/proc/r.json", "--db", "{db}"], {}),
        ("report-output-folder", ["report", "--format", "csv", "-o", "{tmp}/d", "--db", "{db}"], {"d": "dir"}),
        ("report-output-missing-folder", ["report", "-o", "{tmp}/no/r.txt", "--db", "{db}"], {}),
        ("report-output-fifo", ["report", "--format", "csv", "-o", "{tmp}/fifo", "--db", "{db}"], {"fifo": "fifo"}),
        ("report-output-device", ["report", "--format", "csv", "-o", "{tmp}/full", "--db", "{db}"], {"full": "chardev"}),
        ("report-png-output-device", ["report", "--format", "png", "-o", "{tmp}/full", "--db", "{db}"],
         {"full": "chardev"}),
        ("report-table-output-unwritable", ["report", "-o", "/sys/r.txt", "--db", "{db}"], {}),
        ("report-no-db", ["report", "--db", "{tmp}/missing.duckdb"], {}),
        ("report-db-folder", ["report", "--db", "{tmp}/d"], {"d": "dir"}),
        ("report-db-text", ["report", "--db", "{tmp}/t.duckdb"], {"t.duckdb": b"not a database\n" * 200}),
        ("report-db-empty-file", ["report", "--db", "{tmp}/t.duckdb"], {"t.duckdb": b""}),
        ("list-until-9999-12-31", ["list", "--until", "9999-12-31", "--db", "{db}"], {}),
        ("list-since-0001-01-01", ["list", "--since", "0001-01-01", "--db", "{db}"], {}),
        ("list-since-9999w", ["list", "--since", "9999w", "--db", "{db}"], {}),
        ("list-since-9999m", ["list", "--since", "9999m", "--db", "{db}"], {}),
        ("list-since-huge-days", ["list", "--since", "99999999999d", "--db", "{db}"], {}),
        ("list-since-words", ["list", "--since", "last week", "--db", "{db}"], {}),
        ("list-limit-zero", ["list", "--limit", "0", "--db", "{db}"], {}),
        ("list-limit-huge", ["list", "--limit", str(10 ** 20), "--db", "{db}"], {}),
        ("list-limit-text", ["list", "--limit", "abc", "--db", "{db}"], {}),
        ("list-bad-class", ["list", "--class", "RE.9", "--db", "{db}"], {}),
        ("list-bad-component", ["list", "--component", "gpu", "--db", "{db}"], {}),
        ("list-bad-state", ["list", "--state", "merged", "--db", "{db}"], {}),
        ("list-bad-sort", ["list", "--sort", "random", "--db", "{db}"], {}),
        ("list-bad-format", ["list", "--format", "xlsx", "--db", "{db}"], {}),
        ("list-bad-engine", ["list", "--engine", "tgi", "--db", "{db}"], {}),
        ("list-bad-fix", ["list", "--fix", "reboot", "--db", "{db}"], {}),
        ("list-no-db", ["list", "--db", "{tmp}/missing.duckdb"], {}),
        ("list-db-text", ["list", "--db", "{tmp}/t.duckdb"], {"t.duckdb": b"not a database\n" * 200}),
        ("show-empty-ref", ["show", "", "--db", "{db}"], {}),
        ("show-hash-only", ["show", "#", "--db", "{db}"], {}),
        ("show-no-number", ["show", "vllm#", "--db", "{db}"], {}),
        ("show-number-text", ["show", "vllm#abc", "--db", "{db}"], {}),
        ("show-number-zero", ["show", "vllm#0", "--db", "{db}"], {}),
        ("show-number-huge", ["show", "vllm#" + "9" * 30, "--db", "{db}"], {}),
        ("show-number-5001-digits", ["show", "vllm#" + "9" * 5001, "--db", "{db}"], {}),
        ("show-number-2^40", ["show", "vllm#1099511627776", "--db", "{db}"], {}),
        ("show-number-superscript", ["show", "vllm#²", "--db", "{db}"], {}),
        ("show-number-arabic-indic", ["show", "vllm#٣", "--db", "{db}"], {}),
        ("show-unknown-engine", ["show", "tgi#5", "--db", "{db}"], {}),
        ("show-foreign-url", ["show", "https://example.com/a/b/issues/1", "--db", "{db}"], {}),
        ("show-url-huge-number", ["show", "https://github.com/vllm-project/vllm/issues/" + "9" * 40, "--db", "{db}"], {}),
        ("show-not-stored", ["show", "vllm#999999", "--db", "{db}"], {}),
        ("show-similar-negative", ["show", "vllm#5", "--similar", "-1", "--db", "{db}"], {}),
        ("show-similar-huge", ["show", "vllm#5", "--similar", str(10 ** 20), "--db", "{db}"], {}),
        ("show-no-db", ["show", "vllm#5", "--db", "{tmp}/missing.duckdb"], {}),
        ("stats-db-text", ["stats", "--db", "{tmp}/t.duckdb"], {"t.duckdb": b"not a database\n" * 200}),
        ("stats-db-folder", ["stats", "--db", "{tmp}/d"], {"d": "dir"}),
        ("eval-gold-missing", ["eval", "--gold", "{tmp}/missing.jsonl", "--dev-only"], {}),
        ("eval-gold-folder", ["eval", "--gold", "{tmp}/d", "--dev-only"], {"d": "dir"}),
        ("eval-gold-dev-zero", ["eval", "--gold", "/dev/zero", "--dev-only"], {}),
        ("no-such-command", ["frobnicate"], {}),
    ]
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    """Three real-looking issues, labeled by the current model's version (rows written through the store)."""
    from retriage.classifier import current_model_version
    from retriage.db import writes
    from retriage.db.importer import import_files
    from retriage.db.store import connect, transaction

    folder = tmp_path_factory.mktemp("hostile")
    src = folder / "issues.jsonl"
    src.write_bytes(jl({"number": 5}, {"number": 6, "created_at": "2025-02-10T00:00:00Z"},
                       {"number": 7, "repo": "sgl-project/sglang", "created_at": "2025-03-01T00:00:00Z"}))
    path = folder / "small.duckdb"
    con = connect(path)
    import_files(con, [src])
    now = datetime(2026, 1, 1)
    with transaction(con):
        writes.save_predictions(con, [(repo, number, "RE.1", "engine_setup", 0.9, 0.8, False, [],
                                       current_model_version(), now)
                                      for repo, number in con.execute("SELECT repo, number FROM issues").fetchall()])
    con.close()
    return path


def _setup(tmp: Path, files: dict) -> None:
    for name, data in files.items():
        p = tmp / name
        if data == "dir":
            p.mkdir()
        elif data == "fifo":
            os.mkfifo(p)
        elif data == "chardev":  # a device like /dev/full (as root, a node of our own: a broken build must
            # not turn the machine's /dev/full into a regular file; otherwise /dev/full, which we cannot replace)
            if os.geteuid() == 0:
                os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
            else:
                p.symlink_to("/dev/full")
        elif data == "symlink-to-dir":
            (tmp / "target-dir").mkdir()
            p.symlink_to(tmp / "target-dir")
        else:
            p.write_bytes(data)


def run_main(argv: list[str], monkeypatch, capsys, stdin: bytes = b"") -> tuple[int, str, str]:
    """`retriage ARGV` through the real entry point, in this process: (exit code, stdout, stderr)."""
    from retriage.cli import main

    monkeypatch.delenv("RETRIAGE_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["retriage", *argv])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    capsys.readouterr()
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name, argv, files", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_a_one_line_user_error(name, argv, files, tmp_path, small_db, monkeypatch, capsys):
    _setup(tmp_path, files)
    new = tmp_path / "new.duckdb"
    args = [a.replace("{tmp}", str(tmp_path)).replace("{db}", str(small_db)).replace("{new}", str(new))
            for a in argv]
    before = {p.name: (p.stat().st_mode, p.is_symlink()) for p in tmp_path.iterdir()}
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(args, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code in (1, 2), (code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("retriage: error: "), err[-2000:]
    assert "Traceback" not in err + out and "internal error" not in err
    assert not new.exists() and not Path(f"{new}.wal").exists(), "a failed command left a new database behind"
    after = {p.name: (p.stat().st_mode, p.is_symlink()) for p in tmp_path.iterdir()}
    assert after == before, "a failed command created, removed or replaced a file"


def test_the_case_table_is_large_and_names_are_unique():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


def test_a_good_import_after_all_this_still_works(tmp_path, monkeypatch, capsys):
    """The cases above fail for their content, not because import is broken: the same command on GOOD works."""
    f = tmp_path / "in.jsonl"
    f.write_bytes(jl({}, {"number": 2147483647, "title": "max INTEGER"}, {"number": "12"}))
    code, out, err = run_main(["import", str(f), "--db", str(tmp_path / "x.duckdb"), "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["new"] == 3


@pytest.mark.slow  # fresh interpreters: the installed entry point as a user runs it
@pytest.mark.parametrize("name", ["import-nested-array", "import-number-2^40", "import-dev-zero",
                                  "report-until-9999-12-31", "list-limit-text", "predict-output-folder"])
def test_a_few_cases_in_a_fresh_process(name, tmp_path, small_db):
    from conftest import run_cli

    _, argv, files = next(c for c in CASES if c[0] == name)
    _setup(tmp_path, files)
    new = tmp_path / "new.duckdb"
    args = [a.replace("{tmp}", str(tmp_path)).replace("{db}", str(small_db)).replace("{new}", str(new))
            for a in argv]
    proc = run_cli(*args, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode in (1, 2) and len(lines) == 1 and lines[0].startswith("retriage: error: "), proc.stderr
    assert not new.exists()


@pytest.mark.parametrize("command", [["import", "{bomb}", "--db", "{new}"],
                                     ["predict", "-i", "{bomb}", "-o", "{tmp}/out.jsonl"]])
def test_a_gzip_of_gigabytes_of_blank_space_is_a_one_line_error(command, tmp_path, monkeypatch, capsys):
    """3 MB of gzip holding 3 GB of blank lines and spaces: refused after 64 MiB of blank space, in one line,
    whatever reads issue records (before: read up to the 2 GiB cap, 2.1 GB of memory, ~16 s)."""
    member = gzip.compress(b" \n" * (32 << 20), 9)
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(member * 46)
    new = tmp_path / "new.duckdb"
    args = [a.replace("{bomb}", str(bomb)).replace("{new}", str(new)).replace("{tmp}", str(tmp_path))
            for a in command]
    code, out, err = run_main(args, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert lines[0].startswith(f"retriage: error: {bomb}:") and "characters of blank space" in lines[0]
    assert not new.exists() and not (tmp_path / "out.jsonl").exists()
