"""`retriage classify`: a pasted log -> engine, root-cause class and component, known fixes with this engine's
flags, the evidence lines, and similar past issues.

The component comes from the embedding classifier, whose features include the rule matches; the first
matching rule gives the fix. The class is one verdict (triage/verdict.py): the first rule's when that rule's
class was right often enough on the labeled traces (its measured precision at the bar), else the model's, and
then the rule's fix is only worth checking; when they differ the answer says why in one line. The environment
block (GPU models, compute capabilities, versions: taxonomy/environment.py) is shown and used: mixed GPUs are
RE.3 evidence, bf16 on a GPU below compute capability 8.0 adds the dtype fix. The facts parsed from the log
(triage/evidence.py: process groups, watchdog timeouts, Ray workers, prefill counters ...) are shown, read by the
rules that require or exclude them, and weighed in the verdict by their measured precision. A regression named in
the log ("worked on 0.6.3, fails on 0.7.0", "bisected to #123": triage/regression.py) leads the first fix's steps.

Two ways to the class: the fast path (static MiniLM features read by a head distilled from the model,
classifier/fast_path.py: a few milliseconds) answers when it is clearly on one side of the model's decision
boundaries; otherwise, or with `exact=True`, the three MiniLM views are embedded and the model itself answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from retriage.classifier.features import VIEW_FIELDS
from retriage.core.document import document
from retriage.classifier.model import IssueClassifier
from retriage.db.neighbours import NeighbourIndex
from retriage.triage import engine as engine_detect
from retriage.triage import evidence as evidence_facts
from retriage.triage import logtext
from retriage.triage import regression as regression_read
from retriage.triage.fixtext import fix as fix_entry
from retriage.triage.verdict import decide
from retriage.core.rules import Match, applies_to, default_rules, match_rules
from retriage.taxonomy import environment as env_parse

MAX_FIXES = 3


@dataclass
class TriageResult:
    engine: str | None
    engine_reason: str
    re_class: str
    re_confidence: float
    component: str
    component_confidence: float
    abstained: bool
    fixes: list[dict]
    evidence: list[str]
    similar: list[dict]
    exception: str | None = None
    frames: list[str] = field(default_factory=list)
    disagreement: str | None = None
    notes: list[str] = field(default_factory=list)
    model_version: str | None = None
    fast_path: bool = False  # answered by the fast path (static MiniLM) rather than the full model
    class_source: str = "model"  # "rule": a rule with a high measured precision decided the class
    class_rule: dict | None = None  # that rule: {"id", "right", "traces"} on the labeled traces
    model_class: dict = field(default_factory=dict)  # the model's own answer: {"re_class", "re_confidence"}
    environment: dict | None = None  # GPUs, compute capabilities, versions found in the log
    fix_worth_checking: bool = False  # the first rule is below the precision bar: its fix is worth checking only
    facts: dict = field(default_factory=dict)  # fact name -> phrase, parsed from the log (triage/evidence.py)
    regression: dict | None = None  # a regression the log names (triage/regression.py), its step leads the fixes

    def to_json(self) -> dict:
        """The documented --json shape (README, "classify")."""
        d = asdict(self)
        keys = ["engine", "engine_reason", "re_class", "re_confidence", "class_source", "class_rule", "model_class",
                "component", "component_confidence", "abstained", "fixes", "evidence", "similar", "exception",
                "frames", "disagreement", "environment", "facts", "regression", "notes", "model_version", "fast_path"]
        return {k: d[k] for k in keys}


def _environment_fixes(env: env_parse.Environment, text: str, matches: list[Match]) -> list[Match]:
    """bf16 asked for on a GPU below compute capability 8.0: the dtype fix, unless a rule already gave it."""
    low = env.lowest_capability()
    if low is None or low >= 8.0 or not env_parse.asks_for_bf16(text):
        return []
    if any(m.rule.tag == "cuda_arch_mismatch" for m in matches):
        return []
    rule = next((r for r in default_rules()[0] if r.id == "bf16-on-pre-ampere"), None)
    if rule is None:
        return []
    gpus = ", ".join(f"{g} ({env.capabilities.get(i, '?')})" for i, g in env.gpus.items()) or f"compute capability {low}"
    return [Match(rule, f"environment: dtype bfloat16 on {gpus}")]


class Triage:
    """Holds the loaded model, the fast head and the similar-issues index, so that a long-lived process answers
    each trace quickly. `fast=False` always runs the full model. `index=False` asks the database for similar
    issues each time instead of holding their vectors (cheaper for a process that answers once)."""

    def __init__(self, model: IssueClassifier | None = None, embedder=None, fast: bool = True, index: bool = True,
                 evidence: bool = True):
        self.model = model or IssueClassifier.load()
        self.use_evidence = evidence  # False: the answer as before the facts were read (for measuring them)
        self.rules = None  # None: taxonomy/rules.toml; a list: these rules (a benchmark's "before")
        self.precision = None  # None: taxonomy/rule_precision.toml
        self._embedder = embedder
        self.fast_head = self.static = None
        self.fast_unavailable = ""  # why the fast path is off although it was asked for
        if fast:
            self._load_fast_path()
        self.index = NeighbourIndex() if index else None  # the issues' vectors, for similar issues

    def _load_fast_path(self) -> None:
        from retriage.classifier.fast_path import FastHead
        from retriage.classifier.static_embed import StaticMiniLM, check_table

        head, why = FastHead.load(self.model.folder, self.model.version) if self.model.folder else (None, "")
        if head is None:
            self.fast_unavailable = why or "no fast head for this model"
            return
        table, why = check_table()
        if table is None:
            self.fast_unavailable = why
            return
        if table.shape[0] != len(head.idf):
            self.fast_unavailable = (f"the static embedding table has {table.shape[0]} rows, the fast head reads "
                                     f"{len(head.idf)}: reinstall retriage")
            return
        self.fast_head, self.static = head, StaticMiniLM(table)

    @property
    def embedder(self):
        if self._embedder is None:
            from retriage.classifier.embed import get_embedder

            self._embedder = get_embedder("numpy")
        return self._embedder

    def _encode_views(self, texts: list[str]) -> list:
        """One embedding per view, computed in parallel threads (the matrix products release the GIL).

        BLAS goes to one thread here, before the threads start: limited from inside the threads instead, a
        process that had run BLAS multi-threaded before took ~15x longer."""
        from concurrent.futures import ThreadPoolExecutor

        from retriage.classifier.embed import one_blas_thread

        embedder = self.embedder
        with one_blas_thread(), ThreadPoolExecutor(len(texts)) as pool:
            return list(pool.map(lambda t: embedder.encode([t]), texts))

    def _probabilities(self, v) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, bool]:
        """(the calibrated RE and component probabilities, the first view's vector for similar issues, whether
        the fast path answered). Both paths mix in the nearest labeled issues' votes: the full model finds them
        with the view embeddings, the fast path with its estimated vote vector."""
        lex_re, lex_comp = self.model.lexical_logits([v])
        if self.fast_head is not None:
            avgs, ids = self.fast_head.static_features(self.static, [v])
            f_re, f_comp = self.fast_head.embedding_logits(avgs, ids)
            p = self.fast_head.probabilities(self.model, lex_re + f_re, lex_comp + f_comp, avgs)
            if self.fast_head.confident(*p)[0]:
                return p, self.fast_head.first_view_vector(avgs)[0], True
        emb = self._encode_views([getattr(v, f) for f in VIEW_FIELDS])
        e_re, e_comp = self.model.embedding_logits(emb)
        return self.model.probabilities(lex_re + e_re, lex_comp + e_comp, emb), emb[0][0], False

    def run(self, data: bytes | str, engine: str | None = None, con=None, similar: int = 5) -> TriageResult:
        """`con`: a DuckDB connection, a function returning one (or None), or None for no similar issues."""
        log = logtext.parse(data)
        guess = engine_detect.detect(log.raw, engine)  # as pasted: worker prefixes (Worker_TP0, TP0) are engine signals
        env = env_parse.parse(log.raw)
        mixed = evidence_facts.mixed_gpus(env)
        facts = evidence_facts.facts(log.raw, mixed or "") if self.use_evidence else None
        # once: the features read them too, through the document
        every_match = match_rules(log.lines, rules=self.rules, facts=facts)
        matches = [m for m in every_match if applies_to(m.rule, guess.engine)]
        title = log.lines[log.exception_line] if log.exception_line is not None else (
            log.lines[log.last_error_line] if log.last_error_line is not None else "")
        v = document(title, log.text, matches=tuple(every_match))
        probabilities, vector, fast = self._probabilities(v)
        pred = self.model.predictions_from(*probabilities)[0]
        extra = _environment_fixes(env, log.raw, matches)
        if extra:
            matches = matches[:1] + extra + matches[1:] if matches else extra
        verdict = decide([m for m in matches if not m.line.startswith("environment: ")], pred.re_class,
                         pred.re_confidence, pred.abstained, log.raw, mixed_gpus=mixed, precision=self.precision,
                         facts=facts)
        regression = regression_read.regression_advice(log.raw) if self.use_evidence else None

        evidence: list[str] = []
        env_lines = [f"environment: mixed GPUs ({mixed})"] if mixed else []
        lead = [f"regression: {regression['line']}"] if regression else []
        for line in lead + [m.line for m in matches[:MAX_FIXES]] + env_lines + [title]:
            line = line.strip()[:400]  # cut before comparing: a long line must not appear twice
            if line and line not in evidence:
                evidence.append(line)
        neighbours = []
        if callable(con):  # a connection still being opened in the background
            con = con()
        if con is not None and similar > 0:
            from retriage.classifier import current_model_name
            from retriage.db.similar import SHOWN, similar_issues

            neighbours = [{k: n[k] for k in SHOWN} for n in similar_issues(
                con, vector, current_model_name(self.model.folder), limit=similar, index=self.index)]
        exc = None
        if log.exception_type:
            exc = f"{log.exception_type}: {log.exception_message}".rstrip(": ")
        notes = list(log.notes)
        if self.fast_unavailable:
            notes.append(f"fast path off: {self.fast_unavailable}")
        return TriageResult(
            engine=guess.engine, engine_reason=guess.reason,
            re_class=verdict.re_class, re_confidence=verdict.confidence,
            component=pred.component, component_confidence=pred.component_confidence, abstained=verdict.abstained,
            fixes=regression_read.lead_with([fix_entry(m, guess.engine) for m in matches[:MAX_FIXES]], regression),
            evidence=evidence, similar=neighbours,
            exception=exc, frames=log.frames, disagreement=verdict.reason, notes=notes,
            model_version=self.model.version, fast_path=fast, class_source=verdict.source, class_rule=verdict.rule,
            model_class={"re_class": pred.re_class, "re_confidence": pred.re_confidence},
            environment=env.to_json(), fix_worth_checking=verdict.worth_checking, facts=facts or {},
            regression=regression,
        )
