"""The lexical layer: code-aware tokens, BM25 checked against bm25s, the cached index of `search` over a real
DuckDB file (keyed by its content, rebuilt from the counts of unchanged issues, built again when damaged)."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

from conftest import corpus_file
from retriage.core.bm25 import Bm25, term_hashes
from retriage.core.tokens import HEX, NUM, token_counts, tokenize
from retriage.db import lexical
from retriage.db.importer import import_files
from retriage.db.store import connect


def test_code_ish_text_stays_findable():
    toks = tokenize("OSError: [Errno 28] No space left on device: '/dev/shm/nccl-x1' — try --gpu-memory-utilization "
                    "0.8; got CUDA_ERROR_OUT_OF_MEMORY in torch.cuda.OutOfMemoryError at 0x7f3a2b11")
    for t in ("/dev/shm", "shm", "--gpu-memory-utilization", "gpu", "utilization", "cuda_error_out_of_memory",
              "torch.cuda.outofmemoryerror", "outofmemoryerror", "out", "memory", "oserror", "errno"):
        assert t in toks, t
    assert HEX in toks and NUM in toks
    assert not {"28", "0.8", "0x7f3a2b11", "7f3a2b11"} & set(toks), toks


def test_numbers_and_machine_prefixes_are_normalised():
    a = tokenize('File "/usr/local/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1203: '
                 'Tried to allocate 20.00 MiB (GPU 3; 79.15 GiB total) at 0xdeadbeef rank 7')
    b = tokenize('File "/opt/conda/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 88: '
                 'Tried to allocate 512.00 MiB (GPU 0; 23.65 GiB total) at 0x1234abcd rank 0')
    assert a == b
    assert "vllm/worker/model_runner.py" in a
    assert "0.6.3" in tokenize("vllm 0.6.3")  # versions are kept


def test_counts_match_tokens():
    text = corpus_file("vllm.jsonl.gz")
    with gzip.open(text, "rt", encoding="utf-8") as f:
        bodies = [json.loads(line)["body"] or "" for _, line in zip(range(30), f)]
    for body in bodies:
        assert token_counts(body) == Counter(tokenize(body))


def test_bm25_agrees_with_bm25s():
    bm25s = pytest.importorskip("bm25s")
    with gzip.open(corpus_file("sglang.jsonl.gz"), "rt", encoding="utf-8") as f:
        docs = [tokenize((r["title"] or "") + "\n" + (r["body"] or "")) for r in
                (json.loads(line) for _, line in zip(range(200), f))]
    docs = [d or ["<empty>"] for d in docs]
    rows = [(i, t, n) for i, d in enumerate(docs) for t, n in Counter(d).items()]
    ours = Bm25.from_counts(len(docs), np.array([r[0] for r in rows]), term_hashes([r[1] for r in rows]),
                            np.array([r[2] for r in rows]))
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index(docs, show_progress=False)
    for query in (["cuda", "memory"], ["/dev/shm"], ["radix", "cache", "hit"], ["--mem-fraction-static", "oom"]):
        q = [t for t in query if t in ref.vocab_dict]
        got, ceiling = ours.score(query)
        want = ref.get_scores(q) if q else np.zeros(len(docs))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert (got <= ceiling + 1e-4).all()


@pytest.fixture
def small_db(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    records = []
    for name in ("vllm.jsonl.gz", "llama_cpp.jsonl.gz"):
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            records += [json.loads(line) for _, line in zip(range(60), f)]
    src = tmp_path / "slice.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    con = connect(tmp_path / "lex.duckdb")
    import_files(con, [src])
    return con, records


def test_index_is_cached_by_content_and_rebuilt_from_unchanged_counts(small_db, tmp_path):
    con, records = small_db
    idx, cost = lexical.build(con)
    assert cost["tokenised"] == len(idx) == 120 and cost["reused"] == 0
    again = lexical.load(con, build_missing=False)
    assert again is not None and len(again) == 120  # loaded, not rebuilt
    before = lexical.fingerprint(con)
    r = dict(records[0], body=(records[0]["body"] or "") + "\nzyxwvut appears now", updated_at="2030-01-01T00:00:00Z")
    src = tmp_path / "changed.jsonl"
    src.write_text(json.dumps(r) + "\n", encoding="utf-8")
    import_files(con, [src])
    assert lexical.fingerprint(con) != before
    assert lexical.load(con, build_missing=False) is None  # the old index does not answer for new text
    idx2, cost2 = lexical.build(con)
    assert cost2["tokenised"] == 1 and cost2["reused"] == 119
    scores, _ = idx2.score("zyxwvut")
    assert scores.argmax() == idx2.row(r["repo"], int(r["number"])) and (scores > 0).sum() == 1
    # the rebuilt index equals one built from nothing
    import shutil

    shutil.rmtree(tmp_path / "cache")
    fresh, _ = lexical.build(con)
    np.testing.assert_allclose(fresh.score("cuda memory error")[0], idx2.score("cuda memory error")[0], rtol=1e-6)


def test_a_damaged_index_is_built_again_and_old_kinds_are_cleared(small_db, tmp_path):
    con, records = small_db
    idx, _ = lexical.build(con)
    want = idx.score("cuda memory error")[0]
    root = tmp_path / "cache" / "lexical"
    stale = [root / "similar-t5-120-0123456789abcdef", root / "fingerprints"]  # what earlier versions kept here
    for p in stale:
        p.mkdir()
        (p / "x.json").write_text("{}")
    (root / lexical.fingerprint(con) / "post_score.npy").write_bytes(b"\x93NUMPY garbage")
    again = lexical.load(con)
    np.testing.assert_allclose(again.score("cuda memory error")[0], want, rtol=1e-6)
    assert lexical.load(con, build_missing=False) is not None  # the damaged folder was replaced, not kept
    assert not any(p.exists() for p in stale)
    (root / lexical.fingerprint(con) / "stamp.npy").write_bytes(b"")  # its counts cannot be reused
    r = dict(records[0], title="changed", updated_at="2030-01-01T00:00:00Z")
    src = tmp_path / "changed.jsonl"
    src.write_text(json.dumps(r) + "\n", encoding="utf-8")
    import_files(con, [src])
    _, cost = lexical.build(con)
    assert cost["tokenised"] == len(again) and cost["reused"] == 0


def test_coverage_counts_the_query_terms_present():
    docs = [tokenize("mount /dev/shm in docker"), tokenize("shm is small"), tokenize("nothing here")]
    rows = [(i, t, n) for i, d in enumerate(docs) for t, n in Counter(d).items()]
    b = Bm25.from_counts(3, np.array([r[0] for r in rows]), term_hashes([r[1] for r in rows]),
                         np.array([r[2] for r in rows]))
    cov = b.coverage(tokenize("/dev/shm"))
    assert cov[0] == pytest.approx(1.0) and 0 < cov[1] < 1 and cov[2] == 0
    assert (b.coverage(tokenize("/dev/shm neverseenword")) == 0).all()


def _corpus_issue(name: str, number: int) -> dict:
    with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
        return next(r for r in map(json.loads, f) if r["number"] == number)


def test_search_indexes_what_the_reporter_wrote():
    """llama.cpp#411 pastes lscpu, whose CPU-vulnerability lines say "Speculative Store Bypass"; vLLM's engine
    config lines name `speculative_config=None`. Neither is what the reporter wrote: neither is indexed. The
    failure lines of a real crash are (llama.cpp#14740), its prose is not one."""
    from retriage.core.textprep import failure_lines

    lscpu = _corpus_issue("llama_cpp.jsonl.gz", 411)
    assert "Speculative Store Bypass" in lscpu["body"]
    text = lexical.doc_text(lscpu["title"], lscpu["body"])
    assert not {"speculative", "bypass"} & set(tokenize(text))
    config = ("INFO 04-10 llm_engine.py:234] Initializing a V1 LLM engine (v0.8.3) with config: model='m', "
              "speculative_config=None, tokenizer='m', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
              "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=4096, download_dir=None, load_format=auto")
    assert "speculative" not in tokenize(lexical.doc_text("t", "The server stops.\n" + config))
    crash = _corpus_issue("llama_cpp.jsonl.gz", 14740)
    text, n = lexical.indexed(crash["title"], crash["body"])
    lines = failure_lines(text.splitlines())
    assert n >= 3 and any("cudaMalloc failed: out of memory" in x for x in lines)
    assert not any(x.startswith("Hello.") for x in lines)


def test_the_index_leaves_out_the_gguf_metadata_dump():
    """llama.cpp#13298 names `quantized_by` and `head_count_kv` only in llama_model_loader's key/value dump: a query
    about quantized or KV-cache issues must not match it there; the KV-cache lines it logged at run time stay."""
    r = _corpus_issue("llama_cpp.jsonl.gz", 13298)
    assert {"quantized", "general.quantized_by"} <= set(tokenize(r["body"]))
    terms = set(tokenize(lexical.doc_text(r["title"], r["body"])))
    assert not {"quantized", "general.quantized_by", "head_count_kv"} & terms
    assert "llama_kv_cache_unified" in terms
