"""Fine-tuning the MiniLM sentence encoder on labeled issues (issue 15, item 3).

A batch-all triplet loss (sentence-transformers' `BatchAllTripletLoss`) pulls issues of the same class
together and pushes other classes apart. Batches are balanced: each holds the same number of issues of every
class it draws from, since `none` is about 85 % of the labeled set and a random batch would hold almost no
RE.2 or RE.4. Steps alternate between the RE-class target and the component target, so the encoder learns
both. The loop is plain torch (no `datasets`/`accelerate`), on CPU.

`finetune_encoder` returns a `SentenceTransformer`; `save_fp16` writes it as a folder that
`TunedEmbedder` (and sentence-transformers) loads. Nothing here reads or writes a database. An experiment
(`bench/finetune`), not part of the package.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from retriage.classifier.embed import DIM, MAX_TOKENS, model_path


@dataclass
class TuneSettings:
    steps: int = 60
    per_class: int = 6           # issues per class in a batch
    seq_len: int = 128           # word pieces read while training (prediction reads MAX_TOKENS)
    lr: float = 2e-5
    warmup: float = 0.1
    seed: int = 0
    targets: tuple[str, ...] = ("re_class", "component")


def balanced_batches(labels: list[str], settings: TuneSettings, rng: random.Random) -> list[list[int]]:
    """`settings.steps` batches of indices, each with `per_class` issues of every class that has at least two
    (drawn without replacement within a pass over the class, so small classes are cycled, not repeated in
    one batch)."""
    by_class: dict[str, list[int]] = {}
    for i, y in enumerate(labels):
        by_class.setdefault(y, []).append(i)
    pools = {c: [] for c, idx in by_class.items() if len(idx) >= 2}
    out = []
    for _ in range(settings.steps):
        batch = []
        for c in sorted(pools):
            picked: list[int] = []
            for _ in range(min(settings.per_class, len(by_class[c]))):
                if not pools[c]:  # a new pass over the class; what this batch holds comes last in it
                    rest = [i for i in by_class[c] if i not in picked]
                    rng.shuffle(rest)
                    pools[c] = picked[:] + rest
                picked.append(pools[c].pop())
            batch += picked
        out.append(batch)
    return out


def finetune_encoder(texts: list[str], labels: dict[str, list[str]], settings: TuneSettings | None = None,
                     progress: Callable[[int, float], None] | None = None):
    """The shipped MiniLM tuned on `texts` with one label list per target (same order as `texts`).
    `progress(step, loss)` is called after each step."""
    settings = settings or TuneSettings()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer, losses

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    model = SentenceTransformer(str(model_path()), device="cpu")
    model.max_seq_length = settings.seq_len
    loss = losses.BatchAllTripletLoss(model)
    plans = {t: balanced_batches(labels[t], settings, rng) for t in settings.targets}
    codes = {t: {c: i for i, c in enumerate(sorted(set(labels[t])))} for t in settings.targets}
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr)
    warm = max(1, int(settings.steps * settings.warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (settings.steps - s) / max(1, settings.steps - warm)))
    model.train()
    for step in range(settings.steps):
        target = settings.targets[step % len(settings.targets)]
        batch = plans[target][step]
        feats = model.preprocess([texts[i] for i in batch]) if hasattr(model, "preprocess") else \
            model.tokenize([texts[i] for i in batch])
        y = torch.tensor([codes[target][labels[target][i]] for i in batch])
        value = loss([feats], y)
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if progress:
            progress(step + 1, float(value.detach()))
    model.eval()
    model.max_seq_length = MAX_TOKENS
    return model


def save_fp16(model, folder: Path) -> Path:
    """The tuned encoder as a sentence-transformers folder with fp16 safetensors weights."""
    model.half()
    model.save(str(folder), safe_serialization=True)
    model.float()
    return folder


class TunedEmbedder:
    """An `Embedder` (name, dimension, encode) over a tuned encoder held in memory or saved in a folder."""

    dimension = DIM

    def __init__(self, model, name: str, batch_size: int = 32):
        if isinstance(model, (str, Path)):
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(model), device="cpu")
            model.float()
        self.model, self.name, self.batch_size = model, name, batch_size
        self.model.max_seq_length = MAX_TOKENS

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        out = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
        if progress:
            progress(len(texts))
        return out
