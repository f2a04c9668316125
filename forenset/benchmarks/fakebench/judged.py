"""Model-judged Completeness, Preciseness and Relevance of an answer (FakeBench §4.1).

FakeBench complements BLEU / ROUGE-L / similarity with "GPT-assisted" measures: a judge model
reads the golden clues and a model's answer and gives, for each image, one value in {0, 1, 2}
(low to high) per dimension:

* Completeness: more information aligning with the golden clues is preferred;
* Preciseness: information that conflicts with the golden clues is penalised;
* Relevance: more information should be closely related to image authenticity.

"The measurement for each dimension is computed for 5 rounds, which are averaged": here each
round is its own request (its own seed, so its own cache entry) at ``temperature`` 1.0, and the
item's value is the mean over the rounds that returned a valid judgment
(:func:`average_rounds`). A failed round is left out of the mean and counted in
``details["failed_rounds"]``; when every round fails the values are null with the last error.
Without a judge pool the stage writes null with the reason, never a made-up number.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from forenset.backends.llm.types import ChatRequest, ChatResult, LLMSettings
from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.seeds import derive_seed

if TYPE_CHECKING:
    from forenset.backends.llm.cache import ResponseCache

TEMPLATE = "fakebench_judge"
METRICS = ("completeness", "preciseness", "relevance")
NO_JUDGE = "no judge model configured (fakebench.judge)"
DEFAULT_ROUNDS = 5


class CPRJudgment(BaseModel):
    """One round's judgment: each measure one of 0 (low), 1, 2 (high)."""

    model_config = ConfigDict(extra="ignore")
    completeness: int = Field(ge=0, le=2)
    preciseness: int = Field(ge=0, le=2)
    relevance: int = Field(ge=0, le=2)


@dataclass(frozen=True)
class JudgedPair:
    item_id: str
    question: str
    prediction: str
    reference: str


def average_rounds(
    rounds: Sequence[CPRJudgment | None], *, model: str, backend: str, error: str = ""
) -> dict[str, Score]:
    """Per measure, the mean of the valid rounds' values (None = a failed round)."""
    ok = [r for r in rounds if r is not None]
    failed = len(rounds) - len(ok)
    if not ok:
        reason = f"every judge round failed: {error}" if error else "no judge round was run"
        return {m: null_score(m, reason, model=model, backend=backend) for m in METRICS}
    details = {"rounds": len(ok), "failed_rounds": failed}
    return {
        m: Score(m, fmean(getattr(r, m) for r in ok), model, backend, details=details)
        for m in METRICS
    }


def judge_request(
    pair: JudgedPair, round_no: int, *, build_seed: int, prompts_root: str | Path | None = None
) -> ChatRequest:
    """Round ``round_no`` of one pair: its own seed, so rounds are separate samples."""
    req = ChatRequest.from_template(
        "fakebench_scores",
        f"{pair.item_id}#round{round_no}",
        TEMPLATE,
        prompts_root,
        response_model=CPRJudgment,
        question=pair.question,
        reference=pair.reference.strip(),
        prediction=pair.prediction.strip() or "(no answer)",
        schema=json.dumps(CPRJudgment.model_json_schema(), sort_keys=True),
    )
    seed = derive_seed(build_seed, "fakebench-judge", pair.item_id, round_no)
    return dataclasses.replace(req, temperature=1.0, seed=seed)


class ModelCPRJudge:
    """Completeness / Preciseness / Relevance from an ``llm:`` pool, ``rounds`` rounds each."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        rounds: int = DEFAULT_ROUNDS,
        build_seed: int = 0,
        stage: str = "fakebench_scores",
        cache: ResponseCache | None = None,
        prompts_root: str | Path | None = None,
    ) -> None:
        if rounds < 1:
            raise ValueError("the judge needs at least one round")
        self.settings = settings
        self.rounds = rounds
        self.build_seed = build_seed
        self.stage = stage
        self.cache = cache
        self.prompts_root = prompts_root
        self.transient_failures = 0  # rounds that failed with a retryable error (last evaluate)

    def _run(self, requests: list[ChatRequest]) -> list[ChatResult]:
        from forenset.backends.llm.engine import run_chat  # the SDKs load only when used

        return run_chat(
            requests, self.settings, build_seed=self.build_seed, stage=self.stage, cache=self.cache
        )

    def evaluate(self, pairs: Sequence[JudgedPair]) -> list[dict[str, Score]]:
        """Per pair (in input order) its three averaged measures."""
        reqs = [
            judge_request(p, k, build_seed=self.build_seed, prompts_root=self.prompts_root)
            for p in pairs
            for k in range(self.rounds)
        ]
        results = self._run(reqs) if reqs else []
        self.transient_failures = sum(1 for r in results if not r.ok and r.retryable)
        out = []
        for i, _ in enumerate(pairs):
            mine = results[i * self.rounds : (i + 1) * self.rounds]
            parsed = [
                r.parsed if r.ok and isinstance(r.parsed, CPRJudgment) else None for r in mine
            ]
            errors = [r.error or "" for r in mine if not r.ok]
            models = (
                ",".join(sorted({r.model for r in mine if r.model})) or self.settings.pool[0].model
            )
            backends = ",".join(sorted({r.backend for r in mine if r.backend}))
            out.append(
                average_rounds(
                    parsed,
                    model=models,
                    backend=backends or self.settings.pool[0].backend,
                    error=errors[-1] if errors else "",
                )
            )
        return out
