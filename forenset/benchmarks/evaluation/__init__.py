"""The XPlainVerse evaluation (Table 5): sampled evaluation sets, detections by the models
under evaluation, their scores, and the gold references a human writes."""

from forenset.families import AnnotationProject, Family

_P = "forenset.benchmarks.evaluation"

FAMILY = Family(
    name="evaluation",
    title="XPlainVerse evaluation (Table 5)",
    stages={
        "eval_sets": f"{_P}.stages.eval_sets:EvalSets",
        "detections": f"{_P}.stages.detections:Detections",
        "eval_scores": f"{_P}.stages.eval_scores:EvalScores",
    },
    config_section="evaluation",
    config=f"{_P}.config:EvaluationConfig",
    metrics={  # XPlainVerse Table 5, in the paper's order after the detection scores
        "f1": f"{_P}.scorers.table5:F1_SCORE",
        "accuracy": f"{_P}.scorers.table5:ACCURACY",
        "entity_score": f"{_P}.scorers.table5:ENTITY_SCORE",
        "evidence_score": f"{_P}.scorers.table5:EVIDENCE_SCORE",
        "bertscore_f1": f"{_P}.scorers.table5:BERTSCORE_F1",
        "sle": f"{_P}.scorers.table5:SLE",
    },
    responder_kinds=("detector", "llm", "file"),
    cli=f"{_P}.cli:app",
    report=f"{_P}.report:evaluation_section",
    importers={"gold_references": "import-gold"},
    tables={"gold_references": f"{_P}.schemas.gold_references:SCHEMA"},
    labelstudio={
        "gold": AnnotationProject(
            title="forenset gold",
            xml=f"{_P}.gold:GOLD_XML",
            task_files=("gold_overlap_tasks.json", "gold_tasks.json"),
            folder="labelstudio-gold",
            command="export-gold RUN",
            then="forenset import-gold {run} {latest}",
        )
    },
    store_commands=("import-gold", "export-gold"),
)
