"""Text preparation (classifier/textprep.py) on real issue bodies from the corpus and the real traces.

What the spec asks: environment dumps (collect_env output, pip lists, lscpu, GPU topology) are stripped, log
prefixes are stripped, and the title, exception lines and last frames of tracebacks are kept. The patterns that
recognise dumps and prefixes here are the test's own, written from what the real bodies contain.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from conftest import corpus_file
from retriage.core.textprep import clean_lines, key_lines, prepare, strip_ansi, strip_prefix

TRACES = Path(__file__).resolve().parent / "data" / "traces"


@pytest.fixture(scope="module")
def bodies() -> dict[tuple[str, int], dict]:
    out = {}
    for name in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz"):
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                out[(r["repo"], r["number"])] = r
    return out


# ---- environment dumps -----------------------------------------------------------------------------------------
ENV_SECTION = re.compile(r"Collecting environment information\.\.\.\n(.*?)(?:\n```|</details>)", re.S)
# Lines that only an environment dump writes (collect_env.py, its lscpu part, its pip/conda lists, nvidia-smi topo).
DUMP_MARKERS = {
    "collect_env": re.compile(r"^(PyTorch version|Is debug build|CUDA used to build PyTorch|ROCM used to build PyTorch|"
                              r"Python platform|Is CUDA available|Nvidia driver version|cuDNN version|"
                              r"Versions of relevant libraries|vLLM Build Flags):"),
    "pip": re.compile(r"^\[(pip3?|conda)\] "),
    "lscpu": re.compile(r"^(Architecture|CPU op-mode\(s\)|Byte Order|Address sizes|CPU\(s\)|On-line CPU\(s\) list|"
                        r"Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\d* ?(CPU\(s\))?|Vendor ID|"
                        r"Model name|Stepping|BogoMIPS|Flags|L[123]\w? cache|Vulnerability [\w ]+):"),
    "gpu_topology": re.compile(r"^(GPU\d+\s+(X|NV\d+|SYS|NODE|PHB|PXB|PIX)\b|\s*(X|SYS|NODE|PHB|PXB|PIX|NV#)\s+= |Legend:)"),
}


def env_sections(bodies) -> list[tuple[tuple[str, int], str, str]]:
    out = []
    for key, r in bodies.items():
        body = (r["body"] or "").replace("\r\n", "\n")
        m = ENV_SECTION.search(body)
        if m:
            out.append((key, body, m.group(1)))
    return out


def test_real_collect_env_dumps_are_stripped(bodies):
    sections = env_sections(bodies)
    assert len(sections) >= 50, "the corpus should hold many collect_env dumps"
    total = kept = 0
    seen_family = dict.fromkeys(DUMP_MARKERS, 0)
    for key, body, section in sections:
        dump = [ln.strip() for ln in section.split("\n") if ln.strip()]
        for family, rx in DUMP_MARKERS.items():
            seen_family[family] += sum(1 for ln in dump if rx.match(ln))
        survivors = [ln.strip() for ln in clean_lines(body)]
        for ln in survivors:
            for family, rx in DUMP_MARKERS.items():
                assert not rx.match(ln), f"{key}: {family} line kept: {ln[:100]!r}"
        dump_set = set(dump)
        total += len(dump)
        kept += sum(1 for ln in survivors if ln in dump_set)
    assert all(seen_family.values()), f"every dump family occurs in the real dumps: {seen_family}"
    print(f"\n{len(sections)} collect_env dumps, {total} lines; {kept} ({kept / total:.1%}) survive clean_lines")
    assert kept / total < 0.05


def test_dump_does_not_reach_the_embedded_text(bodies):
    """vllm#4383: collect_env with lscpu, pip list and GPU topology before an NCCL failure at TP=2."""
    r = bodies[("vllm-project/vllm", 4383)]
    text = prepare(r["title"], r["body"])
    for family, rx in DUMP_MARKERS.items():
        assert not any(rx.match(ln) for ln in text.split("\n")), family
    assert text.startswith(r["title"])
    assert "ncclSystemError" in text
    assert "NCCL WARN Error while creating shared memory segment" in text


def test_error_lines_that_look_like_environment_keys_are_kept(bodies):
    """'CUDA error: out of memory', 'CMake Error at ...': they start like an environment key but are the report."""
    rx = re.compile(r"^(CUDA error: out of memory|CMake Error at \S+|HIP error: .+|CUDA Error: no kernel image.+)$")
    found = 0
    for key, r in bodies.items():
        for raw in (r["body"] or "").replace("\r", "").split("\n"):
            line = strip_prefix(strip_ansi(raw)).strip()
            if rx.match(line):
                found += 1
                assert line in [ln.strip() for ln in clean_lines(r["body"])], f"{key}: {line[:80]!r} dropped"
    assert found >= 5


# ---- log prefixes -----------------------------------------------------------------------------------------------
PREFIXES = {
    "docker-compose": re.compile(r"^[A-Za-z][\w.-]*\s+\| (?!.*\s\|\s)"),  # "vllm-1  | ..." (not a table row)
    "vllm": re.compile(r"^\s*(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ (\[[\w.]+:\d+\]|[\w.]+:\d+\])"),
    "vllm-worker": re.compile(r"^\s*\((VllmWorker\w*|EngineCore\w*|RayWorkerWrapper|Worker\w*)( rank=\d+)? pid=\d+\)"),
    "sglang": re.compile(r"^\s*\[\d{4}-\d\d-\d\d [\d:]+( (DP|TP|EP|PP)\d+)+\]"),
    "tensorrt-llm": re.compile(r"^\s*\[TensorRT-LLM\]\[(ERROR|WARNING|INFO)\]"),
    "torch-rank": re.compile(r"^\s*\[rank\d+\]:"),
}
# The spec's own examples.
SPEC_LINES = [
    ("docker-compose", "vllm  | ERROR 02-11 08:25:49 serving_chat.py:661] RuntimeError: boom", "RuntimeError: boom"),
    ("vllm", "ERROR 02-11 08:25:49 [file.py:12] RuntimeError: boom", "RuntimeError: boom"),
    ("vllm-worker", "(VllmWorker rank=1 pid=3) ERROR 02-11 08:25:49 [file.py:12] RuntimeError: boom", "RuntimeError: boom"),
    ("sglang", "[2025-01-01 10:00:00 TP0] Scheduler hit an exception", "Scheduler hit an exception"),
    ("tensorrt-llm", "[TensorRT-LLM][ERROR] Assertion failed: boom", "Assertion failed: boom"),
]


@pytest.mark.parametrize("kind, line, rest", SPEC_LINES, ids=[s[0] for s in SPEC_LINES])
def test_spec_prefix_examples_are_stripped(kind, line, rest):
    assert strip_prefix(line) == rest


def real_prefixed_lines(bodies, kind: str, limit: int = 200) -> list[str]:
    rx = PREFIXES[kind]
    out = []
    sources = [(r["body"] or "") for r in bodies.values()] + [p.read_text(errors="replace") for p in TRACES.glob("*.txt")]
    for body in sources:
        for raw in body.replace("\r", "").split("\n"):
            line = strip_ansi(raw)
            if rx.match(line) and len(line) < 2000:
                out.append(line)
                if len(out) >= limit:
                    return out
    return out


@pytest.mark.parametrize("kind", list(PREFIXES))
def test_real_prefixed_lines_are_stripped(bodies, kind):
    lines = real_prefixed_lines(bodies, kind)
    assert len(lines) >= 3, f"no real {kind} lines found"
    for line in lines:
        out = strip_prefix(line)
        assert line.rstrip().endswith(out.rstrip()), "only a prefix may be removed"
        for other, rx in PREFIXES.items():
            assert not rx.match(out), f"{other} prefix left in {out[:120]!r} (from {line[:120]!r})"
        rest = line
        for _ in range(4):  # nested prefixes: compose, then worker, then level and time
            for rx in PREFIXES.values():
                rest = rx.sub("", rest, count=1).lstrip()
        # the project may strip more (a bare timestamp), never less, and never a message
        assert rest.strip().endswith(out.strip()) and (out.strip() or not rest.strip()), f"from {line[:120]!r}"


def test_ansi_codes_are_removed():
    colored = "\x1b[0;36m(EngineCore_DP0 pid=738)\x1b[0;0m \x1b[31mERROR\x1b[0m 01-26 09:25:37 [core.py:935] ValueError: x"
    assert strip_ansi(colored) == "(EngineCore_DP0 pid=738) ERROR 01-26 09:25:37 [core.py:935] ValueError: x"
    assert clean_lines(colored) == ["ValueError: x"]


# ---- what is kept -------------------------------------------------------------------------------------------------
FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')
EXCEPTION = re.compile(r"^\s*((?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception))(?::|$)")


def first_traceback(text: str) -> tuple[str, str, str] | None:
    """(exception line, file of the last frame, function of the last frame) of the first traceback."""
    frames = []
    for raw in text.replace("\r", "").split("\n"):
        line = strip_prefix(strip_ansi(raw))
        m = FRAME.match(line)
        if m:
            frames.append(m)
        elif EXCEPTION.match(line) and frames:
            return line.strip(), "/".join(frames[-1].group(1).split("/")[-2:]), frames[-1].group(2)
    return None


def kept(title: str, body: str) -> tuple[bool, bool]:
    found = first_traceback(body)
    text = prepare(title, body)
    return found[0][:80] in text, f"{found[1]} in {found[2]}" in text


def test_exception_and_last_frame_kept_for_every_real_trace():
    checked = 0
    for path in sorted(TRACES.glob("*.txt")):
        body = path.read_text(errors="replace")
        if first_traceback(body) is None:
            continue
        checked += 1
        exc, frame = kept("", body)
        assert exc, f"{path.name}: exception line not in prepare()"
        assert frame, f"{path.name}: last frame not in prepare()"
    assert checked >= 30


def test_exception_and_last_frame_kept_for_real_issue_bodies(bodies):
    results = {key: kept(r["title"], r["body"]) for key, r in bodies.items()
               if first_traceback(r["body"] or "") is not None}
    assert len(results) >= 300
    exc = sum(e for e, _ in results.values()) / len(results)
    frame = sum(f for _, f in results.values()) / len(results)
    missed = [k for k, (e, f) in results.items() if not (e and f)]
    print(f"\n{len(results)} issue bodies with a traceback: exception kept {exc:.1%}, last frame kept {frame:.1%}; "
          f"missed: {missed[:10]}")
    assert exc >= 0.98 and frame >= 0.98


def test_title_comes_first_and_repeats_are_collapsed(bodies):
    """sglang#138: one CUDA assert line per GPU thread; the exception behind them must still be kept."""
    r = bodies[("sgl-project/sglang", 138)]
    text = prepare(r["title"], r["body"])
    assert text.split("\n")[0] == r["title"].strip()
    exc, frame = kept(r["title"], r["body"])
    assert exc and frame
    keys = key_lines(clean_lines(r["body"]))
    shapes = [re.sub(r"\d+", "0", k) for k in keys]
    assert len(shapes) == len(set(shapes))


def test_prepare_handles_empty_and_none():
    assert prepare(None, None) == ""
    assert prepare("Only a title", "") == "Only a title"
    assert clean_lines("") == []


def test_reading_text_drops_template_checklists_in_any_marker_form():
    """`show` prints for_reading(body): llama.cpp's template answered with [Y], [✓], [yes]... is not the body."""
    import gzip
    import json

    from conftest import corpus_file
    from retriage.core.textprep import ANY_CHECKLIST_RE, clean_lines, for_reading

    with gzip.open(corpus_file("llama_cpp.jsonl.gz"), "rt", encoding="utf-8") as f:
        body = next(r["body"] for r in map(json.loads, f) if r["number"] == 3825)
    assert "- [Y] I am running the latest code" in "\n".join(clean_lines(body)), "the classifier's text is as before"
    shown = for_reading(body, 1200)
    assert "Prerequisites" not in shown and "[Y]" not in shown
    assert shown.startswith("Not 100% certain if this is a bug")
    for marker in ("[Y]", "[y]", "[✓]", "[✔]", "[yes]", "[ ]", "[x]", "[✅]"):
        text = f"# Prerequisites\n- {marker} I searched the issues\nThe server crashes with OOM.\n- [link](http://x)"
        assert for_reading(text) == "The server crashes with OOM.\n- [link](http://x)", marker
    assert not ANY_CHECKLIST_RE.match("- [1] a footnote")


# ---- failure lines and the reading text (search's index) ---------------------------------------------------------
def _failure_lines_of(bodies, key: tuple[str, int]) -> list[str]:
    from retriage.core.textprep import failure_lines, for_reading

    return failure_lines(for_reading(bodies[key]["body"], 60000).splitlines())


@pytest.mark.parametrize("key,piece", [
    (("ggml-org/llama.cpp", 2341), "GGML_ASSERT: "),  # ggml's older assertion form
    (("ggml-org/llama.cpp", 9850), "GGML_ASSERT(ok) failed"),  # its newer form: file:line: GGML_ASSERT(cond) failed
    (("ggml-org/llama.cpp", 5848), "ggml_vulkan: Device memory allocation of size"),
    (("sgl-project/sglang", 2384), "OutOfResources"),  # triton's shared-memory limit
    (("sgl-project/sglang", 1093), "Watchdog caught collective operation timeout"),  # NCCL's watchdog
])
def test_failure_lines_of_ggml_vulkan_triton_and_the_nccl_watchdog(bodies, key, piece):
    lines = _failure_lines_of(bodies, key)
    assert any(piece in x for x in lines), (key, lines)


def test_failure_lines_skip_a_quoted_assert_call_and_prose():
    from retriage.core.textprep import failure_lines

    # llama.cpp#589 quotes the source line; llama.cpp#5848 describes the failure in a sentence
    assert failure_lines(["GGML_ASSERT(fp);", "I tried to load the model on two GPUs and it failed"]) == []


def test_reading_text_drops_the_gguf_metadata_dump_and_package_lists(bodies):
    """llama.cpp#13298 pastes llama_model_loader's key/value dump; sglang#747 pastes check_env's package list.
    Both stay for the classifier (clean_lines), neither for a reader or the search index; the error lines stay."""
    from retriage.core.textprep import for_reading

    gguf = bodies[("ggml-org/llama.cpp", 13298)]["body"]
    assert any("llama_model_loader: - kv" in x for x in clean_lines(gguf))
    text = for_reading(gguf, 60000)
    assert "llama_model_loader: - kv" not in text and "general.quantized_by" not in text
    assert "print_info: n_head_kv" not in text and "llama_kv_cache_unified: kv_size" in text  # runtime lines stay

    env = bodies[("sgl-project/sglang", 747)]["body"]
    assert any(x.startswith("hf_transfer: ") for x in clean_lines(env))
    text = for_reading(env, 60000)
    assert not re.search(r"(?m)^(?:hf_transfer|uvloop|flashinfer|numpy): ", text)
    assert "AssertionError" in text


def test_a_short_run_of_name_version_lines_is_kept():
    from retriage.core.textprep import for_reading

    body = "Works with\nvllm: 0.6.3\ntorch: 2.4.0\nbut fails on the next release."
    assert for_reading(body) == body
