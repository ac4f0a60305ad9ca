"""Turn an issue (title + body) or a pasted log into the short text the embedding model reads.

Issue templates carry long environment dumps (``collect_env.py`` output, pip lists, GPU topology tables,
lscpu) that drown the signal, and MiniLM reads only its first 256 word pieces. We strip the dumps and log
prefixes, then put first what identifies a failure: the title, exception lines and error lines, the last
frames of tracebacks; the remaining prose follows.
"""

from __future__ import annotations

import re

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

# Prefixes engines and docker-compose put before each log line.
_PREFIX_RES = [
    re.compile(r"^\s*[\w.-]+\s+\|\s?"),  # docker-compose:  "vllm-1  | ..."
    re.compile(r"^\s*\((?:\w+\s*)?(?:[\w]+ )?(?:rank=\d+ )?pid=\d+(?:, ip=[\d.:]+)?\)\s*"),  # (VllmWorker rank=1 pid=3) / (pid=1, ip=..)
    # vLLM: "ERROR 02-11 08:25:49 [serving_chat.py:661] " and, before v0.8, "ERROR 02-11 08:25:49 serving_chat.py:661] "
    re.compile(r"^\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+"
               r"(?:\[[^\]]*\]\s*|[\w.-]+:\d+\]\s*)?"),
    re.compile(r"^\s*\[rank\d+\]:\s?"),  # torch.distributed workers: "[rank0]: Traceback ..."
    re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T][\d:.,]+(?:\s+[^\]]*)?\]\s*"),  # SGLang "[2025-01-01 10:00:00 TP0] "
    re.compile(r"^\s*\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s+(?:\|\s*)?"),  # ISO timestamp
    re.compile(r"^\s*\[TensorRT-LLM\]\[(?:ERROR|WARNING|INFO)\]\s*"),
]

# Lines that belong to environment dumps, not to the report.
_ENV_LINE_RE = re.compile(
    r"^\s*(?:"
    r"\[(?:pip3?|conda)\]|"
    r"PyTorch|Python|CUDA|ROCM|ROCm|HIP|cuDNN|OS|GCC|Clang|CMake|Libc|XNNPACK|MIOpen|Nvidia driver|"
    r"Is (?:debug build|CUDA available|XNNPACK available)|CUDA used to build PyTorch|ROCM used to build PyTorch|"
    r"GPU models and configuration|Python platform|Neuron SDK|vLLM Version|vLLM Build Flags|"
    r"Architecture|CPU op-mode|Byte Order|Address sizes|CPU\(s\)|On-line CPU|Off-line CPU|Thread\(s\) per core|"
    r"Core\(s\) per socket|Socket\(s\)|NUMA node|Vendor ID|Model name|CPU family|Model|Stepping|Frequency boost|"
    r"CPU max MHz|CPU min MHz|BogoMIPS|Flags|Virtualization|L1d cache|L1i cache|L2 cache|L3 cache|"
    r"Vulnerability [\w ]+|Hypervisor vendor|Virtualization type|CPU MHz|Versions of relevant libraries|"
    r"NVIDIA_VISIBLE_DEVICES|NVIDIA_REQUIRE_CUDA|NVIDIA_DRIVER_CAPABILITIES|NCCL_VERSION|CUDA_VERSION|"
    r"LD_LIBRARY_PATH|PYTORCH_\w+|TORCHINDUCTOR_\w+|OMP_NUM_THREADS|MKL_NUM_THREADS|CUDA_MODULE_LOADING|"
    r"Caching allocator config|TORCH_\w+|VLLM_\w+=|Legend|GPU\d+|NIC\d+|mlx\d_\d|"
    r"X\s+=\s+Self|SYS\s+=|NODE\s+=|PHB\s+=|PXB\s+=|PIX\s+=|NV#\s+=|"
    r"Is device [\w ]+|HIP runtime version|MIOpen runtime version|Transformers|Triton|"
    r"Name:\s|Version:\s|Summary:\s|Home-page:\s|Author|License:\s|Location:\s|Requires|Required-by|"
    r"={5,}|GPU Topology|NIC Legend|CPU:|System Info|CPU Info|vLLM Info|Environment Variables|Could not collect|"
    r"GPU ?\[?\d+\]?\s*:|NUMA node\d*"
    r")(?:(?<=\W)|\b).*$"  # a word boundary only after keys that end in a letter: "CPU(s):", "[pip3] ", "SYS  ="
)
# An error line is kept even when it starts like an environment key ("CUDA error: out of memory").
_ENV_KEEP_RE = re.compile(r"(?i)\berror\b|out of memory|\bfailed\b|exception")
# A line that is only a shared-library path (cuDNN list) or only VAR=value (the environment-variable section).
_BARE_ENV_RE = re.compile(r"^\s*(?:/\S+\.so(?:\.\d+)*|[A-Z][A-Z0-9_]{2,}=\S*)\s*$")
_PIP_FREEZE_RE = re.compile(r"^\s*[A-Za-z0-9_.\-\[\]]+\s*(?:==|@ file:|\s{2,})\s*[\w.+\-]+\s*$")
_CARET_RE = re.compile(r"^\s*[\^~]{3,}\s*$")
# A Python traceback frame: groups path, line number, function. Shared with triage/logtext.py.
FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_EXC_RE = re.compile(
    r"^\s*(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)|AssertionError|KeyError|"
    r"torch\.OutOfMemoryError|OutOfMemoryError)(?::|$)"
)
_ERRLINE_RE = re.compile(
    r"(?i)(?:\berror\b|\bfailed\b|\bfailure\b|out of memory|\boom\b|exception|segmentation fault|"
    r"core dumped|bus error|illegal memory|assert|abort|terminate called|timed? ?out|hang|deadlock|"
    r"not enough|insufficient|cannot|unable to|leak|killed)"
)
_DETAILS_RE = re.compile(r"<details>.*?</details>", re.S | re.I)
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_MD_HEADER_RE = re.compile(
    r"^#{1,6}\s*(?:Your current environment|Environment|System Info|Name and Version|Operating systems|"
    r"Which llama.cpp modules|Command line|GGML backends|Hardware|Models|Problem description.*|"
    r"First Bad Commit|Relevant log output|Before submitting a new issue.*|Reproduction|Describe the bug|"
    r"🐛 Describe the bug|Checklist|Motivation|Related resources|Proposed Change|Feedback Period|CC List|"
    r"Any Other Things|Expected behavior|Steps to reproduce|Information|Tasks|Who can help\??)\s*$",
    re.I,
)
_CHECKLIST_RE = re.compile(r"^\s*[-*]\s*\[[ xX]\]\s")
# For a human reader (show): a template checklist in any marker form ([Y], [y], [✓], [✔], [✅], [yes], [ ]...),
# and the template's own headings and instructions. (The classifier keeps `clean_lines` as it was trained.)
ANY_CHECKLIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])?\s*\[(?:[ xXyYvV✓✔✅☑☒✗✘√*+-]|yes|no|done|ok)\]\s",
                              re.I)
_TEMPLATE_LINE_RE = re.compile(
    r"^\s*(?:#{1,6}\s*(?:Prerequisites|Expected Behavio(?:u)?r|Current Behavio(?:u)?r|Environment and Context|"
    r"Failure Information(?: \(for bugs\))?|Steps to Reproduce|Failure Logs)\s*$|"
    r"Please answer the following questions for yourself before submitting an issue\.?\s*$|"
    r"Please provide detailed information about the (?:actual|expected) behavior you are (?:seeing|expecting)\.?\s*$)",
    re.I)
# For a human reader (show, search): lscpu's CPU-vulnerability lines, which its indented layout puts under a
# "Vulnerabilities:" heading (any language's prefix), left in by clean_lines.
_CPU_VULN_RE = re.compile(
    r"^\s*(?:\S+\s+)?(?:Vulnerabilit(?:y|ies)|Gather data sampling|Itlb multihit|L1tf|Mds|Meltdown|"
    r"Mmio stale data|Retbleed|Spec rstack overflow|Spec store bypass|Spectre v[12]|Srbds|Tsx async abort|"
    r"Reg file data sampling|Bhi|Indirect target selection|Tsa|Vmscape)\s*:", re.I)
# For a human reader (show, search): llama.cpp's model-metadata dump (`llama_model_loader: - kv  12: ...`, its tensor
# types, `print_info: n_head_kv = 8`), and runs of VERSION_RUN or more `package: 1.2.3` lines (SGLang's check_env,
# which clean_lines keeps): they name every key and package, so they would match any query about one.
_LOADER_DUMP_RE = re.compile(r"^\s*(?:llama_model_loader:\s+(?:- (?:kv|type)\b|Dumping metadata)|"
                             r"(?:llm_load_print_meta|print_info):\s.*=)")
_VERSION_LINE_RE = re.compile(r"^\s*[A-Za-z][\w.\-]*(?: [\w.\-]+){0,3}\s*:\s*"
                              r"(?:v?\d+(?:\.[\w+\-]+)+|Module Not Found|Not Available)\s*$")  # a dotted version
VERSION_RUN = 4
_URL_RE = re.compile(r"https?://\S+")
_DIGITS_RE = re.compile(r"\d+")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


def strip_prefix(line: str) -> str:
    """Remove log prefixes (docker-compose service, worker pid, level+timestamp, engine tag)."""
    for _ in range(3):
        before = line
        for rx in _PREFIX_RES:
            line = rx.sub("", line, count=1)
        if line == before:
            break
    return line


def _is_env_line(line: str) -> bool:
    return bool((_ENV_LINE_RE.match(line) or _PIP_FREEZE_RE.match(line) or _BARE_ENV_RE.match(line))
                and not _ENV_KEEP_RE.search(line))


def _looks_like_env_block(block: str) -> bool:
    lines = [ln for ln in block.splitlines() if ln.strip()]
    if len(lines) < 4:
        return False
    envish = sum(1 for ln in lines if _is_env_line(ln))
    return envish / len(lines) > 0.3


def clean_lines(text: str) -> list[str]:
    """Lines of a report with ANSI codes, log prefixes, env dumps, carets and checklists removed."""
    text = strip_ansi(text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _HTML_COMMENT_RE.sub("", text)
    text = _DETAILS_RE.sub(lambda m: "" if _looks_like_env_block(m.group(0)) else m.group(0), text)
    out: list[str] = []
    for raw in text.split("\n"):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        if _is_env_line(line) or _CARET_RE.match(line):
            continue
        if _CHECKLIST_RE.match(line) or _MD_HEADER_RE.match(line):
            continue
        if line.strip() in ("```", "```text", "```bash", "```shell", "```python", "```py", "```console",
                            "```sh", "```log", "```txt", "</details>", "<details>"):
            continue
        if line.lstrip().startswith("<summary>"):
            continue
        out.append(line)
    return out


def key_lines(lines: list[str], max_frames: int = 3) -> list[str]:
    """Exception lines, error lines and the last frames of each traceback, in order, without repeats.

    Lines that differ only in numbers count as repeats (one CUDA assert printed per thread, one error per rank):
    otherwise they fill the few lines MiniLM reads and push the exception out."""
    keep: list[str] = []
    seen: set[str] = set()

    def add(s: str) -> None:
        s = s.strip()
        shape = _DIGITS_RE.sub("0", s)
        if s and shape not in seen:
            seen.add(shape)
            keep.append(s)

    frames: list[str] = []
    for line in lines:
        m = FRAME_RE.match(line)
        if m:
            path = m.group(1)
            short = "/".join(path.split("/")[-2:])
            frames.append(f"{short} in {m.group(3)}")
            continue
        if _EXC_RE.match(line):
            for f in frames[-max_frames:]:
                add(f)
            frames = []
            add(line[:300])
        elif _ERRLINE_RE.search(line) and len(line) < 400:
            add(line)
    return keep


# A machine line that carries a failure (for a reader: search's failure lines, the bot's evidence): an exception
# line, a log or tool line at error level, a CUDA/NCCL/ggml error, a crash of the process. Not an INFO or DEBUG
# line (NCCL INFO names "error" in its settings), not a Markdown heading, not a sentence of the reporter's.
_FAILURE_RE = re.compile(
    r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b|\b(?:ERROR|FATAL|CRITICAL)\b|\bNCCL WARN\b|"
    r"^\s*(?:error|fatal|panic)(?:\s*\[[^\]]*\])?\s*:|^\s*(?:terminate called|Segmentation fault|Aborted|Killed|"
    r"Bus error|Floating point exception)\b|core dumped|CUDA_ERROR_\w+|cudaError\w+|\bCUDA (?:error|out of memory)|illegal memory access|"
    r"\b[\w.:/\[\]-]+:\s+(?:error|fatal error|failed|failed to \w+)\b|\w+ failed with (?:error|status)|"
    r"\bout of (?:device )?memory\b|\bOOM\b|\bassert(?:ion)?\b.*\bfailed\b|\bKilled\b|"
    # ggml's assertions (either form it prints), a backend's "ggml_vulkan: ... failed.", Vulkan result codes, triton's
    # OutOfResources, the NCCL watchdog's timeout
    r"\b[A-Z][A-Z0-9]*_ASSERT(?::|\(.*\)\s*failed)|^\s*[\w.\[\]/-]*[_./][\w.\[\]/-]*:\s.*\bfailed\.?\s*$|"
    r"\bVK_ERROR_\w+|\bErrorOutOf\w+|\bOutOfResources\b|\bout of resources?:|"
    r"\bWatchdog caught collective operation timeout\b|\bbefore timing out\b"
)
_NOT_FAILURE_RE = re.compile(r"(?<![=_])\b(?:INFO|DEBUG)\b(?!=)|^\s*#|^\s*>")  # not NCCL_DEBUG=INFO
_PLAIN_WORD_RE = re.compile(r"[(\"']?[A-Za-z][a-z]*(?:'[a-z]+)?[.,;:!?)\"']*")
_TOOL_PREFIX_RE = re.compile(r"^\s*[\w.\[\]/-]*[_./][\w.\[\]/-]*:\s")
_FIRST_PERSON_RE = re.compile(r"(?i)\b(?:I|I'm|I've|we|my|our|you|please|hello|hi|thanks)\b")


def _is_prose(line: str) -> bool:
    """A sentence of the reporter's: six words or more, mostly plain words (or half of them, in the first person)."""
    words = line.split()
    if len(words) < 6 or _TOOL_PREFIX_RE.match(line):  # "graph_reserve: failed to ..." is a program's line
        return False
    plain = sum(1 for w in words if _PLAIN_WORD_RE.fullmatch(w)) / len(words)
    return plain >= 0.7 or (plain >= 0.5 and bool(_FIRST_PERSON_RE.search(line)))


def failure_lines(lines: list[str], limit: int = 50) -> list[str]:
    """The machine lines among `lines` (already cleaned) that carry a failure, stripped, without repeats that
    differ only in numbers; at most `limit`."""
    out: list[str] = []
    seen: set[str] = set()
    for line in lines:
        s = line.strip()
        if (_EXC_RE.match(s) or (_FAILURE_RE.search(s) and not _is_prose(s))) and not _NOT_FAILURE_RE.search(s):
            shape = _DIGITS_RE.sub("0", s)
            if shape not in seen:
                seen.add(shape)
                out.append(s[:400])
                if len(out) >= limit:
                    break
    return out


def prepare(title: str | None, body: str | None, max_chars: int = 2000) -> str:
    """The text the classifier embeds for an issue: title, then key lines, then the remaining prose."""
    lines = clean_lines(body or "")
    return prepare_lines((title or "").strip(), lines, key_lines(lines), max_chars)


def prepare_lines(title: str, lines: list[str], keys: list[str], max_chars: int = 2000) -> str:
    """`prepare` from lines already cleaned and their key lines."""
    key_set = set(keys)
    prose = [ln.strip() for ln in lines if ln.strip() not in key_set and not FRAME_RE.match(ln)]
    parts = [title] + keys[:12] + prose
    text = "\n".join(p for p in parts if p)
    text = _URL_RE.sub("URL", text)
    return text[:max_chars]


def for_reading(body: str | None, max_chars: int = 3500) -> str:
    """A cleaned body for a human (or labeling) reader, and what `search` indexes: env dumps, lscpu's
    CPU-vulnerability lines, llama.cpp's metadata dump, package-version lists, template checklists (any marker) and
    the template's instructions dropped, head and tail kept."""
    lines = [ln for ln in clean_lines(body or "") if not ANY_CHECKLIST_RE.match(ln)
             and not _TEMPLATE_LINE_RE.match(ln) and not _CPU_VULN_RE.match(ln) and not _LOADER_DUMP_RE.match(ln)]
    text = "\n".join(_without_version_runs(lines))
    if len(text) <= max_chars:
        return text
    head = int(max_chars * 0.7)
    tail = max_chars - head
    return text[:head] + "\n[...]\n" + text[-tail:]


def _without_version_runs(lines: list[str]) -> list[str]:
    """`lines` without each run of VERSION_RUN or more consecutive `name: version` lines."""
    out: list[str] = []
    run: list[str] = []
    for ln in [*lines, None]:
        if ln is not None and _VERSION_LINE_RE.match(ln):
            run.append(ln)
            continue
        if len(run) < VERSION_RUN:
            out.extend(run)
        run = []
        if ln is not None:
            out.append(ln)
    return out
