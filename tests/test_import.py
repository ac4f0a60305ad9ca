"""`retriage import`: shapes accepted, idempotence, and all-or-nothing on bad input."""

from __future__ import annotations

import gzip
import json

import pytest

from retriage.db import store
from retriage.db.importer import import_files
from retriage.db.records import RecordError, issue_row
from retriage.core.errors import UserError
from conftest import corpus_file, run_cli

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only


def _count(db_path) -> int:
    con = store.connect(db_path, read_only=True)
    try:
        return con.execute("SELECT count(*) FROM issues").fetchone()[0]
    finally:
        con.close()


def test_import_corpus_twice_gives_same_rows(db_path):
    vllm = corpus_file("vllm.jsonl.gz")
    expected = sum(1 for _ in gzip.open(vllm))
    first = run_cli("import", str(vllm), "--json", db=db_path)
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["new"] == expected and out["records"] == expected
    assert _count(db_path) == expected
    second = run_cli("import", str(vllm), "--json", db=db_path)
    out2 = json.loads(second.stdout)
    assert (out2["new"], out2["updated"], out2["unchanged"]) == (0, 0, expected)
    assert _count(db_path) == expected


def test_truncated_gzip_and_garbage_fail_and_write_nothing(db_path, tmp_path):
    vllm = corpus_file("vllm.jsonl.gz")
    assert run_cli("import", str(corpus_file("sglang.jsonl.gz")), db=db_path).returncode == 0
    before = _count(db_path)
    trunc = tmp_path / "trunc.jsonl.gz"
    trunc.write_bytes(vllm.read_bytes()[:50_000])
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\x01 this is not json \xff\n")
    for bad in (trunc, garbage):
        proc = run_cli("import", str(bad), db=db_path)
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert str(bad.name) in proc.stderr
        assert _count(db_path) == before


def test_bad_record_names_file_and_line_and_nothing_is_written(db_path, tmp_path):
    f = tmp_path / "mixed.jsonl"
    good = {"repo": "vllm-project/vllm", "number": 5, "title": "ok"}
    f.write_text(json.dumps(good) + "\n" + json.dumps({"title": "no number"}) + "\n")
    proc = run_cli("import", str(f), db=db_path)
    assert proc.returncode != 0
    assert "mixed.jsonl:2" in proc.stderr and "number" in proc.stderr
    con = store.connect(db_path)
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 0


def test_api_shape_array_and_repo_from_urls(db_path, tmp_path):
    api = [
        {"number": 10, "title": "t", "body": "b", "state": "open", "labels": [{"name": "bug"}, {"name": "x"}],
         "user": {"login": "alice"}, "created_at": "2025-01-02T03:04:05Z", "updated_at": "2025-01-03T00:00:00Z",
         "closed_at": None, "comments": 2, "html_url": "https://github.com/sgl-project/sglang/issues/10",
         "author_association": "NONE"},
        {"number": 11, "title": "a PR", "state": "closed", "labels": [], "pull_request": {"url": "x"},
         "repository_url": "https://api.github.com/repos/ggerganov/llama.cpp", "created_at": "2025-01-02T05:00:00+02:00"},
    ]
    f = tmp_path / "api.json"
    f.write_text(json.dumps(api))
    con = store.connect(db_path)
    res = import_files(con, [f])
    assert res.counts["new"] == 2
    rows = con.execute("SELECT repo, number, labels, author, is_pull_request, created_at::TEXT FROM issues "
                       "ORDER BY number").fetchall()
    assert rows[0][:5] == ("sgl-project/sglang", 10, ["bug", "x"], "alice", False)
    assert rows[1][0] == "ggml-org/llama.cpp" and rows[1][4] is True
    assert rows[1][5] == "2025-01-02 03:00:00"  # stored in UTC


@pytest.mark.parametrize("obj, msg", [
    ([1, 2], "expected an issue object"),
    ({"number": "x", "repo": "a/b"}, "number is not an integer"),
    ({"number": 3}, "cannot tell the repository"),
    ({"number": 3, "repo": "a/b", "state": "weird"}, "state must be"),
    ({"number": 3, "repo": "a/b", "created_at": "yesterday"}, "created_at"),
])
def test_record_shape_errors(obj, msg):
    with pytest.raises(RecordError, match=msg):
        issue_row(obj)


def test_missing_file_is_a_user_error(db_path, tmp_path):
    con = store.connect(db_path)
    with pytest.raises(UserError, match="no such file"):
        import_files(con, [tmp_path / "nope.json"])


GH_VIEW = {  # the shape of `gh issue view N --json number,title,body,state,url,createdAt,updatedAt,closedAt,
    #           labels,author,comments`
    "number": 9001, "title": "CUDA OOM at startup", "body": "torch.OutOfMemoryError: CUDA out of memory",
    "state": "CLOSED", "url": "https://github.com/vllm-project/vllm/issues/9001",
    "createdAt": "2025-09-01T10:00:00Z", "updatedAt": "2025-09-02T10:00:00Z", "closedAt": "2025-09-02T09:00:00Z",
    "labels": [{"id": "LA_1", "name": "bug", "description": "", "color": "d73a4a"}],
    "author": {"id": "U_1", "is_bot": False, "login": "bob", "name": "Bob"},
    "comments": [{"id": "IC_1", "author": {"login": "carol"}, "authorAssociation": "MEMBER",
                  "body": "try --gpu-memory-utilization 0.8", "createdAt": "2025-09-01T12:00:00Z",
                  "url": "https://github.com/vllm-project/vllm/issues/9001#issuecomment-555"}],
}


def test_gh_json_shape_imports_with_its_comments(tmp_path):
    from retriage.db.store import Database

    listed = dict(GH_VIEW, number=9002, state="OPEN", url="https://github.com/vllm-project/vllm/issues/9002",
                  comments=[], closedAt=None)
    src = tmp_path / "gh.json"
    src.write_text(json.dumps([GH_VIEW, listed]))  # `gh issue list --json ...` prints an array
    db = Database(tmp_path / "gh.duckdb")
    result = import_files(db, [src])
    assert result.counts["new"] == 2
    with db.reading() as con:
        rows = con.execute("SELECT number, state, author, labels, created_at, closed_at, html_url, comments "
                           "FROM issues ORDER BY number").fetchall()
        comments = con.execute("SELECT repo, issue_number, id, author, body FROM comments").fetchall()
    assert rows[0][:4] == (9001, "closed", "bob", ["bug"]) and rows[1][1] == "open"
    assert rows[0][4].isoformat() == "2025-09-01T10:00:00" and rows[0][5].isoformat() == "2025-09-02T09:00:00"
    assert rows[0][6] == GH_VIEW["url"] and rows[0][7] == 1 and rows[1][5] is None
    assert comments == [("vllm-project/vllm", 9001, 555, "carol", "try --gpu-memory-utilization 0.8")]


def test_import_dash_reads_standard_input(tmp_path):
    from typer.testing import CliRunner

    from retriage.cli import app

    db = tmp_path / "stdin.duckdb"
    r = CliRunner().invoke(app, ["import", "-", "--db", str(db), "--json"], input=json.dumps(GH_VIEW) + "\n")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["new"] == 1
    r = CliRunner().invoke(app, ["import", "-", "-", "--db", str(db)], input="")
    assert isinstance(r.exception, UserError) and "only once" in str(r.exception)


# Gzip bombs of blank space or of one endless line: refused in one line after MAX_RECORD characters, with the
# memory of a record, not of the 3 GB the 3 MB file decompresses to (before: 2.1 GB, refused at the 2 GiB cap).
_MEASURE = """
import json, resource, sys
import duckdb, retriage.db.importer
from retriage.cli import main
out, argv = sys.argv[1], sys.argv[2:]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sys.argv = ["retriage", *argv]
try:
    main()
    code = 0
except SystemExit as e:
    code = e.code
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
open(out, "w").write(json.dumps({"code": code, "grew_mb": (peak - base) / 1024}))
"""


def _bomb(path, head: bytes, fill: bytes, members: int = 46):
    """`head`, then `members` gzip members of 64 MiB of `fill` each: about 3 MB holding about 3 GB."""
    member = gzip.compress(fill * (64 << 20), 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(members):
            f.write(member)
    return path


def test_a_gzip_of_spaces_or_of_one_endless_line_is_refused_before_memory_grows(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    cases = {
        "spaces.jsonl.gz": (b"", b" ", "characters of blank space"),
        "array-of-spaces.json.gz": (b"[", b" ", "characters of blank space"),
        "record-of-spaces.json.gz": (b'[{"repo": "a/b", "number": 1, "title": ', b" ", "item 1 is longer than"),
        "endless-title.jsonl.gz": (b'{"repo": "a/b", "number": 1, "title": "', b"x", "a line longer than"),
    }
    for name, (head, fill, reason) in cases.items():
        src = _bomb(tmp_path / name, head, fill)
        assert src.stat().st_size < 3_200_000
        db, out = tmp_path / f"{name}.duckdb", tmp_path / f"{name}.json"
        proc = subprocess.run([sys.executable, "-c", _MEASURE, str(out), "import", str(src), "--db", str(db)],
                              capture_output=True, text=True, timeout=120, cwd=str(ROOT))
        result = json.loads(out.read_text())
        lines = proc.stderr.strip().splitlines()
        assert result["code"] == 2 and len(lines) == 1, proc.stderr[-2000:]
        assert result["grew_mb"] < 300, (name, result, lines)  # a record's worth (64 MiB), not gigabytes
        assert lines[0].startswith(f"retriage: error: {src}:1: ") and reason in lines[0], lines[0]
        assert "67,108,864 characters" in lines[0]  # MAX_RECORD, 64 MiB
        assert not db.exists()


def test_arrays_and_lines_streamed_across_chunks_give_the_same_rows(tmp_path):
    """Records of about 700 KB each straddle the reader's 1 MiB chunks: a JSON array (compact and indented,
    gzipped or not), JSON lines and blank space between them give the same rows as the records themselves."""
    from retriage.db.importer import read_rows

    records = [{"repo": "vllm-project/vllm", "number": n, "title": f"t{n} é \u2028",
                "body": ("x" * 700_000 + f' "quoted" \\ {n}'), "created_at": "2025-01-02T03:04:05Z"}
               for n in range(1, 9)]
    expected = read_rows([_write(tmp_path / "one.json", json.dumps(records[0]).encode())])
    shapes = {
        "compact.json": json.dumps(records).encode(),
        "indented.json.gz": gzip.compress(json.dumps(records, indent=2).encode()),
        "lines.jsonl": "\n".join(json.dumps(r) for r in records).encode(),
        "spaced.jsonl.gz": gzip.compress(("\n" * 3 + "\n \t\n".join(json.dumps(r) for r in records)
                                          + " " * 3_000_000 + "\n").encode()),
        "spaced-array.json": ("[" + (" " * 1_500_000 + ",\n").join(json.dumps(r) for r in records) + "]").encode(),
    }
    for name, data in shapes.items():
        rows = read_rows([_write(tmp_path / name, data)])
        assert [r["number"] for r in rows] == list(range(1, 9)), name
        assert rows[0] == expected[0] and all(r["body"].endswith(f' "quoted" \\ {r["number"]}') for r in rows)


def _write(path, data: bytes):
    path.write_bytes(data)
    return path
