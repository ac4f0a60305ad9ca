"""Secrets, terminals and honest errors (the audit's cases), through the real entry point.

A token never appears, whole or in part (any 12 characters of it in a row), in what `mine`, `show --base-url`
and the database hold after a server echoes it back: plain, upper-cased or base64-encoded, far enough into a
long message that cutting it to a line used to leave 40 of its 42 characters. Issue text with terminal escapes
and bidirectional overrides is shown, not obeyed. A full disk, a closed standard output and a reader that went
away end in one line (or quietly, exit 0, for `| head`), never exit 70."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, run_cli

from retriage.core.secrets import WINDOW, redact

TOKEN = "ghp_R3TR1AGEsecretTOKEN0123456789abcdefXYZ"
REPO = "vllm-project/vllm"
TITLE = "evil \x1b[31mRED\x1b[0m \u202etxt.exe NUL\x00 end"


def leaks(text: str, token: str = TOKEN) -> list[str]:
    """Every WINDOW-long piece of `token` (any case) found in `text`."""
    low = text.lower()
    return [token[i:i + WINDOW] for i in range(len(token) - WINDOW + 1) if token[i:i + WINDOW].lower() in low]


# -- the redaction step itself ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shown", [
    TOKEN, TOKEN.upper(), TOKEN.lower(), "token " + TOKEN, TOKEN[:-1] + "…", TOKEN[7:30],
    base64.b64encode(TOKEN.encode()).decode(), base64.b64encode(b"x-access-token:" + TOKEN.encode()).decode(),
    base64.b64encode(b"ab" + TOKEN.encode()).decode(), base64.urlsafe_b64encode(b"a" + TOKEN.encode()).decode(),
])
def test_the_token_in_any_form_is_masked(monkeypatch, shown):
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    out = redact(f"Forbidden {shown} (from the server)")
    assert "***" in out and not leaks(out) and not leaks(out, base64.b64encode(TOKEN.encode()).decode())
    assert out.startswith("Forbidden ") and out.endswith(" (from the server)")


@pytest.mark.parametrize("shaped", [
    "ghp_" + "a1B2" * 9, "ghp\\_" + "a1B2" * 9, "github_pat_11ABCDEFG0_" + "x" * 40, "hf_" + "Q" * 34,
    "sk-proj-" + "z9" * 20, "AKIAIOSFODNN7EXAMPLE",
])
def test_token_shaped_strings_are_masked_without_knowing_them(monkeypatch, shaped):
    for var in ("GH_TOKEN", "GITHUB_TOKEN", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    assert redact(f"title: {shaped} here") == "title: *** here"


def test_ordinary_text_is_left_as_it_is(monkeypatch):
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB; ghp_short, sk-1, hf_x, "
            "AKIA, https://github.com/vllm-project/vllm/issues/7472 — base64 aGVsbG8=")
    assert redact(text) == text


# -- the bot's inline text: masked before it is Markdown-escaped -----------------------------------------------

def test_a_title_holding_a_token_reaches_a_comment_masked(monkeypatch):
    from retriage.bot.safe import inline

    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for title, secret in ((f"token {TOKEN}", TOKEN), ("hf_" + "Ab1" * 12,) * 2,
                          ("key github_pat_" + "Z_9" * 12, "github_pat_" + "Z_9" * 12)):
        out = inline(title).replace("\\", "")  # Markdown escapes aside, as GitHub renders it
        assert "***" in out and not leaks(out, secret), out


# -- through the CLI, against the local GitHub server ----------------------------------------------------------

@pytest.fixture
def echo_server(github_server, no_token_env):
    return github_server(repos=[REPO], limit_per_repo=30, token=TOKEN, max_per_page=10)


def _env(server) -> dict:
    return {"GH_TOKEN": TOKEN, "GITHUB_TOKEN": "", "NO_PROXY": "127.0.0.1,localhost", "RETRIAGE_OFFLINE": "0"}


def _dump(db: Path) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return "\n".join(repr(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


@pytest.mark.parametrize("echo", ["plain", "upper", "base64"])
def test_mine_never_prints_or_stores_an_echoed_token(echo_server, tmp_path, echo):
    echo_server.inject("forbidden_echo", path="/issues", echo=echo)
    db = tmp_path / "m.duckdb"
    proc = run_cli("mine", REPO, "--base-url", echo_server.base_url, db=db, env=_env(echo_server))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "403" in said, said
    assert "Traceback" not in said and not leaks(said)
    b64 = base64.b64encode(("token " + TOKEN).encode()).decode()
    stored = _dump(db)
    assert "forbidden" in stored.lower()  # the failure was stored, masked
    assert not leaks(stored) and not leaks(said, b64) and not leaks(stored, b64)


@pytest.mark.parametrize("as_json", [False, True])
def test_show_with_base_url_never_prints_an_echoed_token(echo_server, tmp_path, as_json):
    echo_server.inject("forbidden_echo", path="/issues/12345")
    db = tmp_path / "s.duckdb"
    args = ["show", f"{REPO}#12345", "--base-url", echo_server.base_url] + (["--json"] if as_json else [])
    proc = run_cli(*args, db=db, env=_env(echo_server))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "403" in said, said
    assert not leaks(said)
    if db.exists():
        assert not leaks(_dump(db))


def test_old_status_rows_are_cleaned_by_the_migration(tmp_path):
    from retriage.db.store import connect

    db = tmp_path / "old.duckdb"
    connect(db).close()
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM schema_version WHERE version >= 3")
    con.execute("INSERT INTO sync_state (repo, resource, last_status) VALUES (?, 'issues', ?)",
                [REPO, f"failed: 403 forbidden at /x: Forbidden {'y' * 102} token {TOKEN[:40]}…"])
    con.close()
    connect(db).close()
    con = duckdb.connect(str(db), read_only=True)
    (status,) = con.execute("SELECT last_status FROM sync_state").fetchone()
    con.close()
    assert status.startswith("failed: 403 forbidden") and "***" in status and not leaks(status)


# -- terminal-safe text, and output that cannot be written --------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    from retriage.classifier import current_model_version
    from retriage.db import writes
    from retriage.db.importer import import_files
    from retriage.db.store import connect, transaction

    folder = tmp_path_factory.mktemp("secrets")
    src = folder / "issues.jsonl"
    base = {"repo": REPO, "body": "CUDA out of memory", "state": "open", "created_at": "2025-01-02T03:04:05Z",
            "updated_at": "2025-01-03T00:00:00Z"}
    rows = [dict(base, number=n, title=TITLE if n == 1 else f"issue {n} " + "x" * 60) for n in range(1, 400)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = folder / "h.duckdb"
    con = connect(path)
    import_files(con, [src])
    with transaction(con):
        writes.save_predictions(con, [(REPO, n, "RE.1", "engine_setup", 0.9, 0.8, False, [],
                                       current_model_version(), datetime(2026, 1, 1)) for n in range(1, 400)])
    con.close()
    return path


def test_escapes_and_bidi_overrides_in_a_title_are_shown_not_obeyed(hostile_db):
    for args in (["show", f"{REPO}#1", "--offline"], ["list"]):
        proc = run_cli(*args, db=hostile_db, env={"COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout and "\x00" not in proc.stdout
    shown = run_cli("show", f"{REPO}#1", "--offline", db=hostile_db, env={"COLUMNS": "200"}).stdout
    assert "\\x1b[31mRED" in shown and "<U+202E>" in shown
    csv_out = run_cli("list", "--format", "csv", db=hostile_db).stdout
    assert "\x1b" not in csv_out and "\x00" not in csv_out and "\\x1b[31mRED" in csv_out
    nd = run_cli("list", "--format", "ndjson", db=hostile_db).stdout
    assert "\x1b" not in nd and "\u202e" not in nd
    assert TITLE in {json.loads(line)["title"] for line in nd.splitlines()}  # escaped, the same JSON value


def _raw_cli(args: list, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RETRIAGE_DB"}
    env.update(HF_HUB_OFFLINE="1", RETRIAGE_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "retriage.cli", *args], env=env, cwd=str(ROOT), timeout=300,
                          **kw)


@pytest.mark.parametrize("args", [["list", "--json"], ["report", "--format", "csv"], ["list", "--format", "csv"]])
def test_a_full_disk_ends_in_one_line(hostile_db, args):
    with open("/dev/full", "w") as full:
        proc = _raw_cli(args + ["--db", str(hostile_db)], stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "No space left on device" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_closed_standard_output_ends_in_one_line(hostile_db):
    proc = _raw_cli(["list", "--json", "--db", str(hostile_db)], stderr=subprocess.PIPE, text=True,
                    preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1 and proc.stderr.startswith("retriage: error:") and proc.stderr.count("\n") == 1
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("args", [["list", "--format", "csv", "--limit", "100000"],
                                  ["list", "--format", "ndjson", "--limit", "100000"],
                                  ["search", "issue", "--format", "csv"]])
def test_a_reader_that_goes_away_is_not_a_failure(hostile_db, args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RETRIAGE_DB"}
    env.update(HF_HUB_OFFLINE="1", RETRIAGE_CACHE_DIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "retriage.cli", *args, "--db", str(hostile_db)], env=env,
                         cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and first and err == ""


def test_a_write_protected_output_file_is_refused_and_kept(hostile_db, tmp_path):
    target = tmp_path / "report.txt"
    target.write_text("keep me")
    target.chmod(0o444)
    proc = run_cli("report", "-o", str(target), db=hostile_db)
    assert proc.returncode == 1 and "write-protected" in proc.stderr
    assert target.read_text() == "keep me" and (target.stat().st_mode & 0o777) == 0o444


def test_an_argument_that_is_not_utf8_is_a_usage_error(hostile_db):
    for args in ([b"search", b"caf\xe9"], [b"relabel", b"vllm#1", b"--reason", b"\xff\xfe", b"--class", b"none"]):
        proc = _raw_cli(args + [b"--db", str(hostile_db).encode()], capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.startswith("retriage: error: argument")
        assert proc.stderr.count("\n") == 1


def test_a_damaged_database_and_a_cache_path_that_is_a_file(hostile_db, tmp_path):
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(hostile_db.read_bytes()[:100_000])
    for command in ("stats", "list"):
        proc = run_cli(command, db=cut)
        assert proc.returncode == 1 and "damaged or not a DuckDB database" in proc.stderr
        assert "internal error" not in proc.stderr and "in use" not in proc.stderr
    a_file = tmp_path / "file"
    a_file.write_text("x")
    proc = run_cli("search", "memory", db=hostile_db, env={"RETRIAGE_CACHE_DIR": str(a_file)})
    assert proc.returncode == 2 and "is not a folder" in proc.stderr


def test_only_a_conflicting_lock_is_taken_for_another_process():
    from retriage.db.store import _is_lock_error, _open_error

    held = duckdb.IOException('IO Error: Could not set lock on file "x.duckdb": Conflicting lock is held in '
                              "/usr/bin/python3 (PID 12)")
    refused = duckdb.IOException('IO Error: Could not set lock on file "x.duckdb": Permission denied')
    assert _is_lock_error(held) and not _is_lock_error(refused)
    assert "permission denied" in _open_error("x.duckdb", refused)


@pytest.mark.slow  # the real model labels the fetched issue
def test_comment_and_post_never_carry_the_token(echo_server, tmp_path):
    oom = 188  # "CUDA error: out of memory" (corpus)
    if oom not in {i["number"] for i in echo_server.issues(REPO)}:
        oom = echo_server.issues(REPO)[0]["number"]
    echo_server.edit_issue(REPO, oom, title=f"OOM with token {TOKEN} and hf_{'Ab1' * 12}",
                           body=f"CUDA out of memory\n\n```\nAuthorization: token {TOKEN}\n```")
    db = tmp_path / "c.duckdb"
    posted = run_cli("comment", f"{REPO}#{oom}", "--base-url", echo_server.base_url, "--post", db=db,
                     env=_env(echo_server))
    assert posted.returncode == 0, posted.stderr
    bodies = [w["body"] for w in echo_server.writes] + [c["body"] for c in echo_server.bot_comments(REPO, oom)]
    assert bodies and not any(leaks(json.dumps(b).replace("\\\\", "")) for b in bodies)
    assert not leaks(posted.stdout + posted.stderr) and not leaks(_dump(db))
    echo_server.inject("forbidden_echo", path=f"/issues/{oom}")
    failed = run_cli("comment", f"{REPO}#{oom}", "--base-url", echo_server.base_url, db=tmp_path / "d.duckdb",
                     env=_env(echo_server))
    assert failed.returncode == 1 and "403" in failed.stderr and not leaks(failed.stdout + failed.stderr)


@pytest.mark.slow  # predict loads the real model
def test_predict_to_a_vanished_reader_exits_quietly(tmp_path):
    """More lines than a pipe holds, so the write after the reader left fails with EPIPE. (/dev/full for
    `predict -o -` goes through the same stream as `list --json` above.)"""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"repo": REPO, "number": n, "title": f"CUDA out of memory {n}",
                                       "body": "torch.OutOfMemoryError", "state": "open",
                                       "created_at": "2025-01-02T03:04:05Z"}) + "\n" for n in range(1, 401)))
    env = {k: v for k, v in os.environ.items() if k != "RETRIAGE_DB"}
    env.update(HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "retriage.cli", "predict", "-i", str(src), "-o", "-"], env=env,
                         cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and json.loads(first)["number"] == 1 and err == ""


def test_a_secret_with_a_run_of_zeros_does_not_mask_numbers(monkeypatch):
    monkeypatch.setenv("GH_TOKEN", "ghp_wrongtoken00000000000000000000000000")
    text = "presence_penalty=0.14000000000000012, seed 1000000000000"
    assert redact(text) == text
    assert "***" in redact("token ghp_wrongtoken00000000000000000000000000 and tail wrongtoken000000")
