"""FakeBench's own responder: a model's answers read from the official release's answer files
(``kind: official``), registered by the family (``Family.responders``), not by core."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forenset.benchmarks.common.respond import Answers, Question, Responder
from forenset.benchmarks.fakebench.config import OfficialResponder
from forenset.tasks.base import Stage


class OfficialAnswers(Responder):
    """FakeBench's official answer files: the release's reader writes the rows itself."""

    kind = "official"
    Config = OfficialResponder
    families = ("fakebench",)

    def fingerprint(self, cfg: Any, templates: Sequence[str], prompts_dir: str | None) -> Any:
        from forenset.benchmarks.fakebench.official import ANSWER_FILES, files_digest

        return {
            **super().fingerprint(cfg, templates, prompts_dir),
            "answers_sha256": files_digest(cfg.answers, list(ANSWER_FILES.values())),
        }

    def answer(
        self, stage: Stage, cfg: Any, questions: list[Question], train: list[dict[str, Any]]
    ) -> Answers:
        from forenset.benchmarks.fakebench.official import answer_rows

        return Answers(rows=answer_rows(cfg.name, cfg.answers, [q.item for q in questions]))
