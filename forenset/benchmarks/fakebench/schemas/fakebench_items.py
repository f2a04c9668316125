import pyarrow as pa

from forenset.schemas.common import I64, USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("item_id", S, nullable=False),  # fakeclass/<sid> | fakeclue/<sid> | fakeqa/<sid>/<dim>
    pa.field("task", S),  # fakeclass | fakeclue | fakeqa
    pa.field("sample_id", S),
    pa.field("label", S),  # real | fake (FakeClue and FakeQA hold fakes only)
    pa.field("generator", S),
    pa.field("generator_family", S),
    pa.field("blob", S),
    pa.field("form", S),  # fakeclass: yes_no | what; fakeclue: inference; fakeqa: free
    pa.field("question", S),  # what the evaluated model is asked
    pa.field("answer", S),  # golden: yes/no/real/fake; the golden clue C; the dimension's answer
    pa.field("dimension", S),  # fakeqa: the dimension asked about
    pa.field("dimensions", pa.list_(S)),  # fakeclue: the dimensions its clues cover
    pa.field("clues", S),  # fakeclue: JSON [{dimension, clue}] as written by the author
    pa.field("golden_source", S),  # label | model | offline-diff | human-edited | official
    pa.field("rank", I64),  # position in the set's seeded draw
    *USAGE_FIELDS,
)
