"""Public explainable-detection benchmarks as evaluation sets: FakeClue, LOKI, So-Fake-OOD and
AIGI-Holmes read from folders on disk in each release's own layout (one importer module each),
answered by any responder and scored with the same measures and intervals
(docs/public-benchmarks.md)."""

from forenset.families import Family

_P = "forenset.benchmarks.public"

FAMILY = Family(
    name="public",
    title="Public explainable-detection benchmarks",
    stages={
        "public_items": f"{_P}.stages.public_items:PublicItems",
        "public_answers": f"{_P}.stages.public_answers:PublicAnswers",
        "public_scores": f"{_P}.stages.public_scores:PublicScores",
    },
    config_section="public",
    config=f"{_P}.config:PublicConfig",
    metrics={  # per task type: judgement, multiple choice, explanation
        "accuracy": f"{_P}.scorers:ACCURACY",
        "f1": f"{_P}.scorers:F1",
        "real_accuracy": f"{_P}.scorers:REAL_ACCURACY",
        "fake_accuracy": f"{_P}.scorers:FAKE_ACCURACY",
        "mc_accuracy": f"{_P}.scorers:MC_ACCURACY",
        "bleu1": f"{_P}.scorers:BLEU1",
        "rouge_l": f"{_P}.scorers:ROUGE_L",
        "bertscore_f1": f"{_P}.scorers:BERTSCORE_F1",
        "similarity": f"{_P}.scorers:SIMILARITY",
    },
    responder_kinds=("llm", "file", "constant"),
    cli=f"{_P}.cli:app",
)
