"""The bot's Markdown is safe against hostile issue text (retriage/bot/safe.py, comment.py): no unbroken
@mention, nothing escapes its code block, HTML is inert, length is capped, secrets are masked. In-process, no
model: the verdicts are built by hand from the classify result's shape."""

from __future__ import annotations

import re

import pytest

from retriage.bot import safe
from retriage.bot.comment import render_comment
from retriage.bot.config import load_config
from retriage.bot.verdict import Verdict
from retriage.core.errors import UserError
from retriage.triage.classify import TriageResult

CFG = load_config()
MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9]")  # what GitHub would turn into a mention


def fix(line: str) -> dict:
    return {"id": "cuda-oom-runtime", "tag": "oom_four_step", "title": "GPU out of memory while loading or serving",
            "re_class": "RE.1", "component": "engine_setup",
            "steps": ["lower `--gpu-memory-utilization` (e.g. 0.90 -> 0.85)."], "caveats": [],
            "sources": ["https://github.com/vllm-project/vllm/blob/main/docs/configuration/conserving_memory.md"],
            "line": line}


def verdict(evidence: list[str], title: str = "x", conf: float = 0.97, similar: list | None = None,
            fixes: list | None = None) -> Verdict:
    r = TriageResult(engine="vllm", engine_reason="test", re_class="RE.1", re_confidence=conf,
                     component="engine_setup", component_confidence=0.9, abstained=False,
                     fixes=fixes if fixes is not None else [fix(evidence[0] if evidence else "")],
                     evidence=evidence, similar=similar or [], model_version="m-test")
    return Verdict(r, "vllm#1", title)


def outside_code(markdown: str) -> str:
    """The text of a comment outside its fenced code blocks, read as GitHub does (a fence closes only with a run
    of at least as many backticks, alone on its line)."""
    out, fence = [], None
    for line in markdown.split("\n"):
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if re.fullmatch(re.escape(fence) + r"`*\s*", line):
                fence = None
            continue
        out.append(line)
    assert fence is None, "a code block is left open"
    return "\n".join(out)


HOSTILE = [  # each an error line, so that each reaches the comment's evidence (it quotes failure lines only)
    "RuntimeError: CUDA out of memory @maintainer @org/team cc@someone",
    "RuntimeError: ```",
    "RuntimeError: </details><img src=x onerror=alert(1)><!-- retriage -->",
    "RuntimeError: ````` closing fence attempt ``````",
    "RuntimeError: [click](https://evil.example) ![img](https://evil.example/x.png) | table | break |",
    "RuntimeError: token ghp_" + "A" * 36 + " and hf_" + "b" * 34,
    "RuntimeError: bidi \u202e override \x00 nul \x1b[31m colour",
]


def test_hostile_evidence_stays_inside_its_code_block():
    md = render_comment(verdict(HOSTILE), CFG)
    assert md.startswith(CFG.marker + "\n")
    outside = outside_code(md).split("\n", 1)[1]  # after our own marker
    for bad in ("<img", "<!-- retriage", "</details>", "evil.example", "closing fence", "ghp_", "hf_"):
        assert bad not in outside, bad
    assert not MENTION.search(md), "an @mention reached the comment unbroken (in code too)"
    assert "ghp_" not in md and "hf_b" not in md and "***" in md
    assert "\u202e" not in md and "\x00" not in md and "\x1b" not in md
    # the fence is longer than the longest backtick run inside it
    assert re.search(r"^`{7}text$", md, re.M)


def test_hostile_title_of_a_similar_issue_is_inert_text():
    title = "@admin <script>alert(1)</script> see #42 [x](https://evil.example) | pipe ```"
    sim = [{"repo": "vllm-project/vllm", "number": 7, "title": title, "state": "closed", "score": 0.9,
            "html_url": "https://github.com/vllm-project/vllm/issues/7", "fixed_by": [9], "recorded_fix": "ipc_host",
            "recorded_by": "team label"}]
    md = render_comment(verdict(["CUDA out of memory"], similar=sim), CFG)
    row = next(line for line in md.split("\n") if "vllm#7" in line)
    assert "<script>" not in row and "&lt;script&gt;" in row
    assert "](https://evil.example)" not in row and "\\[x\\]" in row
    assert not MENTION.search(row) and not re.search(r"(?<![\w])#42", row)  # no mention, no cross-reference
    assert len(re.findall(r"(?<!\\)\|", row)) == 6  # five cells: the title's pipes are escaped
    assert "yes (#" in row and "`ipc_host` (team label)" in row


def test_a_one_megabyte_body_line_is_cut_and_the_comment_capped():
    huge = [f"RuntimeError: CUDA out of memory on {chr(65 + i % 26)}{chr(65 + i // 26)} " + "A" * 1_000_000
            for i in range(50)]  # 50 different lines (lines that differ only in numbers are quoted once)
    md = render_comment(verdict(huge), CFG)
    assert len(md) <= CFG.max_chars
    block = md.split("```text\n", 1)[1].split("\n```", 1)[0].split("\n")
    assert len(block) == CFG.max_evidence_lines and all(len(x) <= CFG.max_line_chars for x in block)


def test_cap_drops_trailing_sections_first():
    text = safe.cap(["head", "a" * 500, "b" * 500], 700, "(cut)")
    assert text.startswith("head") and "b" not in text and text.endswith("(cut)") and len(text) <= 700


def test_below_the_class_threshold_only_the_rule_fix_is_said():
    sim = [{"repo": "vllm-project/vllm", "number": 7, "title": "t", "state": "open", "score": 0.99,
            "html_url": "https://github.com/vllm-project/vllm/issues/7", "fixed_by": [], "recorded_fix": None}]
    md = render_comment(verdict(["CUDA out of memory", "other line"], conf=CFG.class_confidence - 0.01,
                                similar=sim), CFG)
    assert "Likely root cause" not in md and "Similar past issues" not in md
    assert "--gpu-memory-utilization" in md and "other line" not in md  # only the line the rule matched
    assert render_comment(verdict(["a line"], conf=0.5, fixes=[]), CFG) is None  # nothing worth saying


def test_config_file_overrides_thresholds_and_rejects_bad_values(tmp_path):
    f = tmp_path / "bot.toml"
    f.write_text('[thresholds]\nclass = 0.99\n')
    cfg = load_config(f)
    assert cfg.class_confidence == 0.99 and cfg.similar_score == CFG.similar_score
    assert "Likely root cause" not in render_comment(verdict(["CUDA out of memory"], conf=0.98), cfg)
    f.write_text('[thresholds]\nclass = 3\n')
    with pytest.raises(UserError, match="class must be a number"):
        load_config(f)
    f.write_text('[labels.default]\n"RE.9" = ["x"]\n')
    with pytest.raises(UserError, match="labels"):
        load_config(f)


@pytest.mark.parametrize("text", ["```", "a ``` b", "````x", "`"])
def test_fence_is_longer_than_any_backtick_run(text):
    fence = safe.fence_for(text)
    assert len(fence) >= 3 and len(fence) > max(len(m) for m in re.findall(r"`+", text))


def test_a_bare_issue_number_takes_the_repository_from_github_actions():
    from retriage.bot.run import issue_ref

    assert issue_ref("123", {"GITHUB_REPOSITORY": "vllm-project/vllm"}) == ("vllm-project/vllm", 123)
    assert issue_ref("sglang#5", {}) == ("sgl-project/sglang", 5)
    with pytest.raises(UserError, match="GITHUB_REPOSITORY"):
        issue_ref("123", {})


def test_the_workflow_runs_on_new_and_edited_issues_with_write_access_and_a_cached_database():
    from pathlib import Path

    yaml = pytest.importorskip("yaml")
    wf = yaml.safe_load((Path(__file__).resolve().parents[1] / ".github/workflows/retriage-triage.yml").read_text())
    on = wf[True]  # YAML 1.1 reads the key `on` as true
    assert set(on["issues"]["types"]) == {"opened", "edited"} and "issues" in on["workflow_dispatch"]["inputs"]
    assert wf["permissions"] == {"issues": "write", "contents": "read"}
    steps = wf["jobs"]["triage"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/cache/restore@") for u in uses)
    assert any(u.startswith("actions/cache/save@") for u in uses)
    assert next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))["with"]["cache"] == "pip"
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "retriage comment ${{ github.event.issue.number }} --post" in runs
    assert "download.pytorch.org/whl/cpu" in runs
    post = next(s for s in steps if "github.event.issue.number }} --post" in s.get("run", ""))
    assert post["env"]["GH_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
