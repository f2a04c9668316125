"""Running responders (``common.responders``): questions in, one answer per question out, with
per-item error isolation written once here for every family.

A stage turns its input rows into :class:`Question` s (an id, the item, the template and
variables an ``llm`` responder is asked with, the id a file names, the parser that says why a
reply is unreadable) and calls :func:`respond`; the registered responder of the config's kind
answers each question with an :class:`Answer` (a reply text, a stated verdict and explanation,
or the forensic detector's ``Detection``), and the stage renders its own rows from them
(:func:`render` keeps a row that cannot be written from failing the shard).

Error isolation: a question whose answering raises is that question's error answer
(:func:`guarded`: ``StageRowError`` with its own ``retryable``, any other exception described
and retryable); ``ConfigurationError`` / ``ContractError`` and a full disk fail the shard, as
in ``RowStage``. A failure that concerns every question (the detector cannot be trained) is
each question's error answer. Shard-level problems of a file (lines that are not records …)
are ``Answers.problems``, one error row each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from forenset.benchmarks.common import responders as registry
from forenset.benchmarks.common.predictions import file_digest, read_predictions
from forenset.benchmarks.common.responders import (
    ConstantResponder,
    DetectorResponder,
    FileResponder,
    LLMResponder,
    ResponderConfig,
)
from forenset.benchmarks.common.training import trained_detector
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.images import decode_rgb
from forenset.seeds import derive_seed
from forenset.tasks.base import (
    ContractError,
    Stage,
    StageRowError,
    describe,
    resource_exhausted,
    writable,
)
from forenset.tasks.modelcall import Outcome, call_validated, feedback, request, template_hashes

if TYPE_CHECKING:
    from forenset.benchmarks.common.detector import Detection


@dataclass
class Question:
    """One thing a responder is asked: ``qid`` names the answer (the row id)."""

    qid: str
    item: dict[str, Any]  # the input row (``blob``: the image)
    key: str = ""  # the id a predictions file names (sample_id, or a family's item id)
    template: str | None = None  # llm: the prompt template and its variables
    prompts_dir: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    unreadable: Callable[[str], str | None] | None = None  # llm: why a reply cannot be read


@dataclass
class Answer:
    """A responder's answer to one question, or why there is none."""

    reply: str | None = None  # the text as given (llm, file line, constant)
    verdict: str | None = None  # a verdict as stated (file, constant), before parsing
    explanation: str | None = None
    detection: Detection | None = None  # the forensic detector's measurement
    record: dict[str, Any] = field(default_factory=dict)  # a file's record (line, raw …)
    trace: dict[str, Any] = field(default_factory=dict)  # backend, model, usage, status
    missing: bool = False  # a file has no line for this question
    error: str | None = None
    retryable: bool = False
    elapsed_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.trace.get("status", "ok") == "ok"

    def error_fields(self) -> dict[str, Any]:
        """The columns of this answer's error row (after the row's identifying columns)."""
        if self.error is None:  # a failed call: its trace says why, the reply as received
            return {**self.trace, "reply": self.reply or None}
        return {"status": "error", "error": writable(self.error), "retryable": self.retryable}

    @staticmethod
    def failed(message: str, retryable: bool) -> Answer:
        return Answer(error=message, retryable=retryable)


@dataclass
class Answers:
    """One responder's answers: by question id, plus shard-level problems (key, sentence) and,
    for a responder that writes a family's rows itself, those ``rows``."""

    by_qid: dict[str, Answer] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    rows: list[dict[str, Any]] | None = None
    backend: str = ""
    model: str = ""


def guarded(produce: Callable[..., Answer], *args: Any) -> Answer:
    """``produce(*args)``'s answer, or the question's error answer (the isolation rule)."""
    t0 = time.perf_counter()
    try:
        a = produce(*args)
    except StageRowError as e:
        a = Answer.failed(str(e), e.retryable)
    except (ConfigurationError, ContractError):
        raise  # every question would fail alike: the shard fails
    except Exception as e:  # noqa: BLE001 - one bad item must not fail the shard
        if resource_exhausted(e):
            raise
        a = Answer.failed(describe(e), True)
    if a.elapsed_ms is None:
        a.elapsed_ms = (time.perf_counter() - t0) * 1000
    return a


def render(
    stage: Stage,
    ident: dict[str, Any],
    make: Callable[..., dict[str, Any] | list[dict[str, Any]]],
    *args: Any,
) -> list[dict[str, Any]]:
    """The row(s) ``make(*args)`` renders from one answer, checked as a table here (a value
    Arrow cannot hold fails this item only), or one error row with ``ident``'s columns."""
    try:
        made = make(*args)
        rows = [made] if isinstance(made, dict) else made
        stage.to_table([{**r, "status": r.get("status", "ok")} for r in rows])
        return rows
    except (ConfigurationError, ContractError):
        raise
    except Exception as e:  # noqa: BLE001 - an unwritable answer is this item's error
        if resource_exhausted(e):
            raise
        return [{**ident, "status": "error", "error": describe(e), "retryable": False}]


class Responder:
    """A responder kind: its config model and how it answers. Subclass, set ``kind`` and
    ``Config``, implement :meth:`answer_one` (or :meth:`answer`), then register it
    (``responders.register`` or the ``forenset.responders`` entry-point group)."""

    kind: ClassVar[str]
    Config: ClassVar[type[ResponderConfig]]
    # the families it answers for; () = every family with model lists (a family's own kind
    # answers its family: ``Family.responders``)
    families: ClassVar[tuple[str, ...]] = ()
    trains: ClassVar[bool] = False  # reads the train split (the stage plans it as an input)

    def fingerprint(self, cfg: Any, templates: Sequence[str], prompts_dir: str | None) -> Any:
        """What of ``cfg`` shapes its answers (a shard's fingerprint)."""
        return {"responder": fingerprint_view(cfg)}

    def answer(
        self, stage: Stage, cfg: Any, questions: list[Question], train: list[dict[str, Any]]
    ) -> Answers:
        return Answers({q.qid: guarded(self.answer_one, stage, cfg, q) for q in questions})

    def answer_one(self, stage: Stage, cfg: Any, q: Question) -> Answer:
        """One question's answer: a responder overrides this, or ``answer`` for a whole batch."""
        raise TypeError(f"responder {type(self).__name__} defines neither answer nor answer_one")


def responder(kind: str) -> Responder:
    return registry.responder_class(kind)()


def respond(
    stage: Stage,
    cfg: ResponderConfig,
    questions: list[Question],
    train: Sequence[dict[str, Any]] = (),
) -> Answers:
    """``cfg``'s answers to ``questions`` (one per question id, errors included)."""
    return responder(cfg.kind).answer(stage, cfg, questions, list(train))


def trains(cfg: ResponderConfig) -> bool:
    """Whether ``cfg``'s responder reads the train split."""
    return bool(registry.responder_class(cfg.kind).trains)


def fingerprint(
    cfg: ResponderConfig, templates: Sequence[str] = (), prompts_dir: str | None = None
) -> Any:
    return responder(cfg.kind).fingerprint(cfg, templates, prompts_dir)


# -- built-ins ---------------------------------------------------------------------------------


class DetectorAnswers(Responder):
    """The offline forensic detector: trained once per process (``common.training``), each
    image explained once; the answer carries the ``Detection``."""

    kind = "detector"
    Config = DetectorResponder
    trains = True

    def answer(
        self, stage: Stage, cfg: Any, questions: list[Question], train: list[dict[str, Any]]
    ) -> Answers:
        try:
            det = trained_detector(stage.ctx, cfg, train)
        except StageRowError as e:
            return Answers({q.qid: Answer.failed(str(e), e.retryable) for q in questions})
        seen: dict[str, Answer] = {}

        def explain(blob: str) -> Answer:
            found = det.explain(decode_rgb(stage.ctx.store.get_blob(blob)))
            return Answer(
                reply=found.reply,
                verdict=found.answer,
                explanation=found.reasoning,
                detection=found,
                trace={"backend": found.backend, "model": found.model},
            )

        out = {}
        for q in questions:
            blob = q.item["blob"]
            if blob not in seen:
                seen[blob] = guarded(explain, blob)
            out[q.qid] = seen[blob]
        return Answers(out)


class ConstantAnswers(Responder):
    """Always ``answer``; the family words the reply (no evidence is named)."""

    kind = "constant"
    Config = ConstantResponder

    def answer_one(self, stage: Stage, cfg: Any, q: Question) -> Answer:
        return Answer(
            verdict=cfg.answer, trace={"backend": "offline", "model": f"constant-{cfg.answer}"}
        )


class FileAnswers(Responder):
    """A predictions file's line for each question's ``key``; a question without a line is a
    ``missing`` answer, each class of file problem one ``problems`` entry."""

    kind = "file"
    Config = FileResponder

    def fingerprint(self, cfg: Any, templates: Sequence[str], prompts_dir: str | None) -> Any:
        return {
            **super().fingerprint(cfg, templates, prompts_dir),
            "file_sha256": file_digest(cfg.path),
        }

    def answer(
        self, stage: Stage, cfg: Any, questions: list[Question], train: list[dict[str, Any]]
    ) -> Answers:
        preds, problems = read_predictions(cfg.path, {q.key for q in questions})
        name = Path(cfg.path).name
        out = {}
        for q in questions:
            p = preds.get(q.key)
            trace = {"backend": "file", "model": name}
            if p is None:
                out[q.qid] = Answer(missing=True, trace=trace)
            else:
                out[q.qid] = Answer(
                    reply=p["raw"],
                    # a submission zip's row may lack either (predictions.read_predictions)
                    verdict=str(p.get("answer") or ""),
                    explanation=str(p.get("explanation") or ""),
                    record=p,
                    trace=trace,
                )
        return Answers(out, list(problems.items()), backend="file", model=name)


def _no_check(parsed: Any) -> list[str]:
    """Replies are free text (no response model): the family's parser reads them."""
    return []


class LLMAnswers(Responder):
    """A model pool: one request per question (its template, variables and the item's image, or
    its ``blobs`` in order when it has several) through ``call_validated``; with ``max_attempts`` above 1 a reply the question's parser
    cannot read is asked again with the reason appended (a new seed), and the last counts."""

    kind = "llm"
    Config = LLMResponder

    def fingerprint(self, cfg: Any, templates: Sequence[str], prompts_dir: str | None) -> Any:
        view = super().fingerprint(cfg, templates, prompts_dir)
        return {**view, "templates": template_hashes(list(templates), prompts_dir)}

    def answer(
        self, stage: Stage, cfg: Any, questions: list[Question], train: list[dict[str, Any]]
    ) -> Answers:
        out: dict[str, Answer] = {}
        reqs = []
        images: dict[str, Answer | bytes] = {}
        for q in questions:
            refs = q.item.get("blobs") or [q.item["blob"]]
            for blob in refs:
                if blob not in images:
                    try:
                        images[blob] = stage.ctx.store.get_blob(blob)
                    except Exception as e:  # noqa: BLE001 - a missing blob fails its item only
                        images[blob] = Answer.failed(describe(e), True)
            failed = next((a for b in refs if isinstance(a := images[b], Answer)), None)
            if failed is not None:
                out[q.qid] = failed
                continue
            attached = [x for b in refs if isinstance(x := images[b], bytes)]
            assert q.template is not None
            reqs.append(
                (
                    q,
                    request(
                        stage.name,
                        q.qid,
                        q.template,
                        q.prompts_dir,
                        images=attached,
                        response_model=None,  # free text: the family's parser reads it
                        **q.variables,
                    ),
                )
            )
        got = self.ask(stage, cfg, reqs) if reqs else {}
        for q, req in reqs:
            o = got[req.item_id]
            text = o.result.text
            out[q.qid] = Answer(reply=text if o.result.ok else (text or None), trace=o.trace())
        return Answers(out)

    def ask(self, stage: Stage, cfg: Any, reqs: list[tuple[Question, Any]]) -> dict[str, Outcome]:
        """Each request's last outcome, usage summed over attempts."""
        original = {r.item_id: (q, r) for q, r in reqs}
        final: dict[str, Outcome] = {}
        pending = [r for _, r in reqs]
        for attempt in range(1, cfg.max_attempts + 1):
            if not pending:
                break
            got = call_validated(
                stage.ctx, stage.name, cfg.llm, [(r, _no_check) for r in pending], 1
            )
            nxt = []
            for req in pending:
                o, prev = got[req.item_id], final.get(req.item_id)
                if prev is not None:
                    o.input_tokens += prev.input_tokens
                    o.output_tokens += prev.output_tokens
                    o.cost_usd += prev.cost_usd
                    o.cached = o.cached and prev.cached
                o.attempts = attempt
                final[req.item_id] = o
                q, first = original[req.item_id]
                reason = q.unreadable(o.result.text) if o.result.ok and q.unreadable else None
                if reason and attempt < cfg.max_attempts:
                    seed = derive_seed(stage.ctx.seed, stage.name, req.item_id, "regenerate")
                    nxt.append(feedback(first, first.user, [reason], attempt, seed))
            pending = nxt
        return final
