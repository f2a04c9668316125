"""FakeBench (Li et al.): FakeClass / FakeClue / FakeQA items, the answers of the models under
evaluation (also read from the official release's answer files: ``official``) and their scores."""

from forenset.families import AnnotationProject, Family

_P = "forenset.benchmarks.fakebench"

FAMILY = Family(
    name="fakebench",
    title="FakeBench",
    stages={
        "fakebench_items": f"{_P}.stages.fakebench_items:FakeBenchItems",
        "fakebench_answers": f"{_P}.stages.fakebench_answers:FakeBenchAnswers",
        "fakebench_scores": f"{_P}.stages.fakebench_scores:FakeBenchScores",
    },
    config_section="fakebench",
    config=f"{_P}.config:FakeBenchConfig",
    metrics={  # FakeBench Tables 4-8: FakeClass accuracy, then Tables 5-7's columns
        "accuracy": f"{_P}.scorers:ACCURACY",
        "bleu1": f"{_P}.scorers:BLEU1",
        "bleu2": f"{_P}.scorers:BLEU2",
        "rouge_l": f"{_P}.scorers:ROUGE_L",
        "similarity": f"{_P}.scorers:SIMILARITY",
        "auto_average": f"{_P}.scorers:AUTO_AVERAGE",
        "completeness": f"{_P}.scorers:COMPLETENESS",
        "preciseness": f"{_P}.scorers:PRECISENESS",
        "relevance": f"{_P}.scorers:RELEVANCE",
        "judged_average": f"{_P}.scorers:JUDGED_AVERAGE",
        "average": f"{_P}.scorers:AVERAGE",
    },
    responder_kinds=("detector", "llm", "constant"),
    responders={"official": f"{_P}.respond:OfficialAnswers"},
    labelstudio={
        "fakeclue": AnnotationProject(
            title="forenset FakeClue",
            xml=f"{_P}.bench_export:CLUE_XML",
            task_files=("fakeclue_tasks.json",),
            folder="fakebench-bench",
            subfolder="labelstudio",
            command="fakebench-export RUN --labelstudio",
            then="set `fakebench: {{clue_edits: {latest}}}` in the build config, then "
            "`forenset build CONFIG`",
        )
    },
    cli=f"{_P}.cli:app",
    report=f"{_P}.report:fakebench_section",
    exports={"fakebench": f"{_P}.exports:export_fakebench"},
)
