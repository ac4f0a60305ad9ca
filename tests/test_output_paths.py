"""Output paths (core/output.py, behind every -o): symlinks written through, FIFOs/devices/folders refused in
one line and left as they are, files created with the umask, `-` as standard output, JSON never NaN."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from retriage.core.errors import UserError
from retriage.core.output import atomic_output, dumps, output_target, write_jsonl_atomic, write_text_atomic

ROWS = [{"repo": "vllm-project/vllm", "number": 1, "re_confidence": 0.5}]


def _device(tmp_path):
    """A character device like /dev/full: our own node as root (so that a broken build cannot replace the
    machine's /dev/full), else /dev/full itself, which a non-root process cannot replace anyway."""
    if os.geteuid() == 0:
        p = tmp_path / "full"
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        return p
    return "/dev/full"


def test_a_symlink_is_written_through_and_stays_a_symlink(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    write_jsonl_atomic(link, ROWS)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [json.loads(x) for x in target.read_text().splitlines()] == ROWS
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["out.jsonl"]  # no temporary file left
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "real" / "new.jsonl")  # a link to a file not there yet: created there
    write_text_atomic(dangling, "x\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.jsonl").read_text() == "x\n"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "link-to-folder", "link-to-fifo"])
def test_non_files_are_refused_in_one_line_and_left_alone(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif kind == "device":
        path = _device(tmp_path)
    elif kind == "folder":
        path = tmp_path
    else:
        inner = tmp_path / "inner"
        inner.mkdir() if kind == "link-to-folder" else os.mkfifo(inner)
        path = tmp_path / "link"
        path.symlink_to(inner)
    before = os.lstat(path)
    with pytest.raises(UserError) as e:
        write_jsonl_atomic(path, ROWS)
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_missing_or_unwritable_folders_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        output_target(tmp_path / "no" / "x.jsonl")
    with pytest.raises(UserError, match="cannot write"):  # /sys refuses new files even to root
        write_text_atomic("/sys/retriage-test.txt", "x")


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_umask_and_old_files_keep_their_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_jsonl_atomic(tmp_path / "new.jsonl", ROWS)
        kept = tmp_path / "kept.jsonl"
        kept.write_text("x")
        os.chmod(kept, 0o604)
        write_jsonl_atomic(kept, ROWS)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.jsonl").st_mode) == mode
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o604


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        write_jsonl_atomic(path, [{"ok": 1}, {"bad": object()}])
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_dash_is_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl_atomic("-", ROWS)
    with atomic_output("-") as f:
        f.write("tail\n")
    assert capsys.readouterr().out == json.dumps(ROWS[0], ensure_ascii=False) + "\ntail\n"
    assert not list(tmp_path.iterdir())  # no file called "-"


def test_json_never_holds_nan(tmp_path):
    obj = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": float("nan")}, "e": "NaN"}
    text = dumps(obj)
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}, "e": "NaN"}
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text
    write_jsonl_atomic(tmp_path / "x.jsonl", [obj])
    json.loads((tmp_path / "x.jsonl").read_text(), parse_constant=lambda c: pytest.fail(f"{c} written"))
