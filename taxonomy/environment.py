"""The environment block of a pasted log or an issue body: GPU models, compute capabilities, GPU count, engine
version, driver.

Read from what reporters paste: `nvidia-smi`'s table, vLLM's `collect_env` ("GPU models and configuration",
"vLLM Version"), `python -m sglang.check_env` ("GPU 0,1: <name>", "GPU 0,1 Compute Capability: 9.0",
"sglang: <version>"), llama.cpp's device list ("Device 0: <name>, compute capability 6.1"), engine start-up
lines ("vLLM API server version", "TensorRT-LLM version") and vLLM's bf16 error ("Your Tesla T4 GPU has compute
capability 7.5"). A GPU whose compute capability is not printed gets it from taxonomy/gpus.toml.

Read by `classify` (triage/classify.py), the rules' class on mixed GPUs (triage/rule_class.py) and the labeling of
stored issues (classifier/device_class.py); it sits here, beside the GPU table, so that all three may import it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache

from retriage.taxonomy import HERE as TAXONOMY_DIR

_NAME = r"(?:NVIDIA|Tesla|Quadro|GeForce|AMD|Instinct|Radeon)[^|,\n]*?"
_SMI_ROW = re.compile(rf"^\|\s+(\d+)\s+({_NAME})\s+(?:On|Off)\s+\|", re.M)
_COLLECT_GPU = re.compile(rf"(?:^|GPU models and configuration\s*:\s*)GPU (\d+): ({_NAME})\s*$", re.M)
_SGL_GPU = re.compile(rf"^GPU ([\d,]+): ({_NAME})\s*$", re.M)
_SGL_CC = re.compile(r"^GPU ([\d,]+) Compute Capability: (\d+\.\d+)", re.M)
_LLAMA_GPU = re.compile(rf"Device (\d+): ({_NAME}), compute capability (\d+\.\d+)")
_BF16_GPU = re.compile(rf"Your ({_NAME}) GPU has compute capability (\d+\.\d+)")
_SINGLE_GPU = re.compile(rf"GPU models and configuration\s*:\s*({_NAME})\s*$", re.M)
_DRIVER = re.compile(r"(?:Driver Version|Nvidia driver version)\s*:\s*([\d.]+)", re.I)
_CUDA = re.compile(r"(?:CUDA Version\s*:\s*|CUDA runtime version\s*:\s*)([\d.]+)")
_VERSIONS = [
    ("vllm", re.compile(r"vLLM Version\s*:\s*(\S+)")),
    ("vllm", re.compile(r"vLLM API server version (\S+)")),
    ("vllm", re.compile(r"Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)")),
    ("vllm", re.compile(r"\bvllm==(\S+)")),
    ("sglang", re.compile(r"^sglang\s*:\s*(\S+)", re.M)),
    ("sglang", re.compile(r"\bsglang==(\S+)")),
    ("trtllm", re.compile(r"TensorRT-LLM (?:version|tag)\s*:?\s*(\d[\w.]*)")),
    ("trtllm", re.compile(r"\btensorrt[_-]llm==(\S+)")),
    ("llama.cpp", re.compile(r"^version: (\d+ \([0-9a-f]+\))", re.M)),
]
BF16_RE = re.compile(r"(?i)(?:dtype\s*[=:]\s*['\"]?(?:torch\.)?bfloat16|--dtype[ =]bfloat16|--dtype[ =]bf16)")


@dataclass
class Environment:
    gpus: dict[int, str] = field(default_factory=dict)  # index -> model name
    capabilities: dict[int, str] = field(default_factory=dict)  # index -> compute capability ("8.0")
    engine_version: str | None = None
    engine_version_of: str | None = None  # which engine the version belongs to
    driver_version: str | None = None
    cuda_version: str | None = None

    @property
    def gpu_models(self) -> list[str]:
        return sorted(set(self.gpus.values()))

    @property
    def compute_capabilities(self) -> list[str]:
        return sorted(set(self.capabilities.values()), key=float)

    @property
    def mixed(self) -> bool:
        """Different GPU models or compute capabilities in one machine (RE.3 evidence)."""
        return len(self.gpu_models) > 1 or len(self.compute_capabilities) > 1

    @property
    def mixed_capabilities(self) -> bool:
        """GPUs of different compute capabilities in one machine: a check on one of them says nothing of the rest."""
        return len(self.compute_capabilities) > 1

    def lowest_capability(self) -> float | None:
        return min(map(float, self.capabilities.values())) if self.capabilities else None

    def empty(self) -> bool:
        return not (self.gpus or self.capabilities or self.engine_version or self.driver_version or self.cuda_version)

    def to_json(self) -> dict | None:
        if self.empty():
            return None
        return {"gpu_count": len(self.gpus) or None, "gpu_models": self.gpu_models,
                "compute_capabilities": self.compute_capabilities, "mixed_gpus": self.mixed,
                "engine_version": self.engine_version, "engine_version_of": self.engine_version_of,
                "driver_version": self.driver_version, "cuda_version": self.cuda_version, "summary": self.summary()}

    def summary(self) -> str:
        """One line for the panel: '2 GPUs: NVIDIA A100 (8.0), Tesla V100 (7.0) · vllm 0.6.3 · driver 535'."""
        parts = []
        if self.gpus or self.capabilities:
            by_model: dict[str, set] = {}
            for i, name in self.gpus.items():
                by_model.setdefault(name, set()).add(self.capabilities.get(i))
            shown = [f"{m} ({'/'.join(sorted(c for c in cc if c))})" if any(cc) else m for m, cc in by_model.items()]
            if not shown:
                shown = [f"compute capability {'/'.join(self.compute_capabilities)}"]
            n = len(self.gpus)
            parts.append((f"{n} GPU{'s' if n != 1 else ''}: " if n else "") + ", ".join(shown))
        if self.engine_version:
            parts.append(f"{self.engine_version_of} {self.engine_version}")
        if self.driver_version:
            parts.append(f"driver {self.driver_version}")
        if self.cuda_version:
            parts.append(f"CUDA {self.cuda_version}")
        return " · ".join(parts)


@lru_cache(maxsize=1)
def _capability_table() -> list[tuple[re.Pattern, str]]:
    with open(TAXONOMY_DIR / "gpus.toml", "rb") as f:
        return [(re.compile(g["match"], re.I), g["cc"]) for g in tomllib.load(f)["gpu"]]


def capability_of(name: str) -> str | None:
    for rx, cc in _capability_table():
        if rx.search(name):
            return cc
    return None


def _indices(spec: str) -> list[int]:
    return [int(x) for x in spec.split(",") if x.strip().isdigit()]


def parse(text: str) -> Environment:
    env = Environment()
    for rx in (_SMI_ROW, _COLLECT_GPU):
        for m in rx.finditer(text):
            env.gpus.setdefault(int(m.group(1)), m.group(2).strip())
    for m in _SGL_GPU.finditer(text):
        for i in _indices(m.group(1)):
            env.gpus.setdefault(i, m.group(2).strip())
    for m in _SGL_CC.finditer(text):
        for i in _indices(m.group(1)):
            env.capabilities.setdefault(i, m.group(2))
    for m in _LLAMA_GPU.finditer(text):
        env.gpus.setdefault(int(m.group(1)), m.group(2).strip())
        env.capabilities.setdefault(int(m.group(1)), m.group(3))
    if not env.gpus:
        m = _BF16_GPU.search(text) or _SINGLE_GPU.search(text)
        if m:
            env.gpus[0] = m.group(1).strip()
            if m.re is _BF16_GPU:
                env.capabilities[0] = m.group(2)
    for i, name in env.gpus.items():
        if i not in env.capabilities and (cc := capability_of(name)):
            env.capabilities[i] = cc
    for engine, rx in _VERSIONS:
        m = rx.search(text)
        if m:
            env.engine_version, env.engine_version_of = m.group(1).rstrip(".,;"), engine
            break
    if m := _DRIVER.search(text):
        env.driver_version = m.group(1)
    if m := _CUDA.search(text):
        env.cuda_version = m.group(1)
    return env


def mixed_capabilities(text: str) -> str | None:
    """'compute capability 7.5 / 8.9' when the text's environment lists GPUs of different capabilities, or None."""
    env = parse(text)
    return f"compute capability {' / '.join(env.compute_capabilities)}" if env.mixed_capabilities else None


def asks_for_bf16(text: str) -> bool:
    return bool(BF16_RE.search(text))
