"""The embedding classifier: text preparation, embeddings, the trained heads, evaluation.

Importing this package is cheap: heavy libraries (torch, sentence-transformers, scikit-learn) load only in the
modules that need them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

EMBEDDING_MODEL = "all-MiniLM-L6-v2"


@lru_cache(maxsize=1)
def _meta() -> dict:
    f = resources.files("retriage.classifier").joinpath("model", "meta.json")
    if not f.is_file():
        return {}
    return json.loads(f.read_text())


def current_model_version() -> str | None:
    """Content hash of the shipped head, or None before any model was trained."""
    return _meta().get("model_version")


def current_model_name() -> str:
    return _meta().get("embedding_model", EMBEDDING_MODEL)
