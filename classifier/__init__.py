"""The embedding classifier: text preparation, embeddings, the trained heads, evaluation.

Importing this package is cheap: heavy libraries (torch, sentence-transformers, scikit-learn) load only in the
modules that need them.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from retriage.core.errors import UserError

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
MODEL_ENV = "RETRIAGE_MODEL"  # a model folder to use instead of the shipped one (as --model)


def shipped_model_dir() -> Path:
    return Path(str(resources.files("retriage.classifier").joinpath("model")))


def model_dir(folder: str | os.PathLike | None = None) -> Path:
    """The model folder in use: `folder` (--model), else $RETRIAGE_MODEL, else the shipped model; a folder
    given by the user must hold a model (a one-line UserError otherwise)."""
    chosen = folder or os.environ.get(MODEL_ENV) or None
    if chosen is None:
        return shipped_model_dir()
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise UserError(f"model folder {path} does not exist (from {'--model' if folder else MODEL_ENV})")
    _meta(str(path.resolve()), True)
    return path


@lru_cache(maxsize=8)
def _meta(folder: str, strict: bool = False) -> dict:
    f = Path(folder) / "meta.json"
    if not f.is_file() or not (Path(folder) / "weights.npz").is_file():
        if strict:
            raise UserError(f"{folder} is not a retriage model folder (no meta.json and weights.npz): "
                            "`retriage train` writes one")
        return {}
    try:
        meta = json.loads(f.read_text())
        if not isinstance(meta, dict) or not isinstance(meta.get("model_version"), str):
            raise ValueError("no model_version")
    except (ValueError, OSError) as e:
        raise UserError(f"damaged model in {folder}: meta.json: {str(e).splitlines()[0]}") from None
    return meta


def current_model_version(folder: str | os.PathLike | None = None) -> str | None:
    """Content hash of the model in use (see `model_dir`), or None before any model was trained."""
    return _meta(str(model_dir(folder).resolve())).get("model_version")


def current_model_name(folder: str | os.PathLike | None = None) -> str:
    return _meta(str(model_dir(folder).resolve())).get("embedding_model", EMBEDDING_MODEL)
