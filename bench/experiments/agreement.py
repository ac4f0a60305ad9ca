"""Inter-annotator agreement: Cohen's kappa per field between the first labels and an independent second
reader, before disagreements were settled. Seven studies, each a pair of files in taxonomy/agreement/:

- "corpus": second_reader.jsonl / adjudication.jsonl, 150 random issues of the corpus batches;
- "real": second_reader_real.jsonl / adjudication_real.jsonl, 150 random issues of the records laid out as
  real issues (TensorRT-LLM and issues filed since 2025-08);
- "real_2": second_reader_real_2.jsonl / adjudication_real_2.jsonl, 150 random issues of the second set of
  them (real_trtllm_2, real_recent_2: 100 of its first round of readers, 50 of its second);
- "set_3": second_reader_set_3.jsonl / adjudication_set_3.jsonl, 150 random issues of the third set
  (real_trtllm_3, real_recent_3, batch_11);
- "set_4": second_reader_set_4.jsonl / adjudication_set_4.jsonl, 150 random issues of the fourth set
  (real_trtllm_4, real_recent_4), read by two second readers (75 each);
- "set_5": second_reader_set_5.jsonl / adjudication_set_5.jsonl, 150 random issues of the fifth set
  (real_trtllm_5, real_recent_5), read by two second readers (75 each);
- "set_6": second_reader_set_6.jsonl / adjudication_set_6.jsonl, all 133 issues of the sixth set, which is
  kept out of training (taxonomy/holdout/fresh_6.jsonl), read by three blind second readers.

An adjudication file records each settled value and the first reader's original one.

    .venv/bin/python -m bench.experiments.agreement     # from the checkout's root: every study's kappas as JSON
"""

from __future__ import annotations

import json
from pathlib import Path

from retriage.classifier.dataset import label_files, read_labels
from retriage.taxonomy import HERE, HOLDOUT_DIR

AGREEMENT_DIR = HERE / "agreement"
FIELDS = ("re_class", "component", "known_fix")


def kappa(a: list[str], b: list[str]) -> float:
    labels = sorted(set(a) | set(b))
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in labels)
    return 1.0 if pe == 1 else (po - pe) / (1 - pe)


STUDIES = {"corpus": "", "real": "_real", "real_2": "_real_2", "set_3": "_set_3", "set_4": "_set_4", "set_5": "_set_5", "set_6": "_set_6"}
ADJUDICATION_KEYS = ("repo", "number", "field", "first", "second", "settled")


def agreement(folder: Path = AGREEMENT_DIR, study: str = "corpus") -> dict:
    first = {}
    for path in [*label_files(), *label_files(HOLDOUT_DIR)]:
        for r in read_labels(path):
            first.setdefault((r["repo"], r["number"]), dict(r))
    suffix = STUDIES[study]
    for a in read_labels(folder / f"adjudication{suffix}.jsonl", ADJUDICATION_KEYS):  # undo the settling: kappa is of the original labels
        first[(a["repo"], a["number"])][a["field"]] = a["first"]
    second = read_labels(folder / f"second_reader{suffix}.jsonl")
    pairs = [(first[(r["repo"], r["number"])], r) for r in second if (r["repo"], r["number"]) in first]
    out = {"n": len(pairs)}
    for f in FIELDS:
        a, b = [p[0][f] for p in pairs], [p[1][f] for p in pairs]
        out[f] = {"kappa": round(kappa(a, b), 3), "agreement": round(sum(x == y for x, y in zip(a, b)) / len(a), 3),
                  "disagreements": sum(x != y for x, y in zip(a, b))}
    return out


if __name__ == "__main__":
    print(json.dumps({study: agreement(study=study) for study in STUDIES}, indent=2))
