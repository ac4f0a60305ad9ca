"""The encoder fine-tuning of bench/experiments/finetune.py (bench/finetune): balanced batches, and a real (tiny)
tuning run of the shipped MiniLM that moves its vectors and keeps their shape."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench/experiments is not part of the package: imported from the checkout

from bench.experiments.finetune import TuneSettings, TunedEmbedder, balanced_batches, finetune_encoder  # noqa: E402


def test_balanced_batches_hold_every_class_alike_and_cycle_small_ones():
    labels = ["none"] * 90 + ["RE.1"] * 6 + ["RE.2"] * 3 + ["RE.4"]  # RE.4 has one issue: no pair, left out
    settings = TuneSettings(steps=5, per_class=2)
    batches = balanced_batches(labels, settings, random.Random(0))
    assert len(batches) == 5
    for b in batches:
        counts = Counter(labels[i] for i in b)
        assert counts == {"none": 2, "RE.1": 2, "RE.2": 2}, counts
        assert len(set(b)) == len(b)  # no issue twice in one batch
    seen_re2 = Counter(i for b in batches for i in b if labels[i] == "RE.2")
    assert set(seen_re2) == {96, 97, 98} and max(seen_re2.values()) - min(seen_re2.values()) <= 1


@pytest.mark.slow  # loads the real MiniLM with torch and trains it
def test_a_short_tuning_run_moves_the_vectors(monkeypatch):
    texts = ["CUDA out of memory while allocating the KV cache", "torch.OutOfMemoryError: tried to allocate 2 GiB",
             "NCCL timeout with tensor parallel size 2", "all-reduce hangs across two GPUs",
             "the tokenizer chat template is missing", "the chat template renders the system prompt twice"]
    labels = {"re_class": ["RE.1", "RE.1", "RE.3", "RE.3", "none", "none"],
              "component": ["engine_setup", "engine_setup", "operators", "operators", "frontend", "frontend"]}
    frozen = TunedEmbedder(finetune_encoder(texts, labels, TuneSettings(steps=0)), "frozen").encode(texts)
    tuned = TunedEmbedder(finetune_encoder(texts, labels, TuneSettings(steps=2, per_class=2, lr=1e-4)),
                          "tuned").encode(texts)
    assert frozen.shape == tuned.shape == (6, 384)
    assert np.allclose(np.linalg.norm(tuned, axis=1), 1.0, atol=1e-4)
    assert float(np.abs(frozen - tuned).max()) > 1e-3  # the steps changed the encoder
