import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema


def _metric(name: str) -> list[pa.Field]:
    """A model-based metric: its value, who computed it, or why it is null."""
    return [
        pa.field(name, F64),
        pa.field(f"{name}_model", S),
        pa.field(f"{name}_reason", S),
    ]


SCHEMA = stage_schema(
    pa.field("score_id", S, nullable=False),  # "<answerer>/<task>/<group_kind>=<group>"
    pa.field("answerer", S),
    pa.field("task", S),  # fakeclass | fakeclue | fakeqa
    pa.field("group_kind", S),  # all | label | form | generator | mode | dimension
    pa.field("group", S),
    pa.field("n", I64),  # answers scored (FakeQA: questions)
    pa.field("n_images", I64),
    pa.field("accuracy", F64),  # fakeclass: §3.2 exact match; fakeclue: the CoT verdict
    pa.field("bleu1", F64),
    pa.field("bleu2", F64),
    pa.field("rouge_l", F64),
    pa.field("overlap_model", S),  # the libraries behind BLEU / ROUGE-L
    *_metric("similarity"),
    *_metric("completeness"),  # judged, 0-2, mean over rounds then items
    *_metric("preciseness"),
    *_metric("relevance"),
    pa.field("auto_average", F64),  # Tables 5-7 "Automatic Metrics Aver.": B-1, B-2, R-L, Sim.
    pa.field("judged_average", F64),  # "GPT-assisted Aver.": Comp., Prec., Rele. on 0-2
    pa.field("average", F64),  # "Overall": (auto_average + judged_average / 2) / 2, on [0, 1]
    pa.field("average_of", S),  # which measures the average covers
)
