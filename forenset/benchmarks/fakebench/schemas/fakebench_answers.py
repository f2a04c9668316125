import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("answer_id", S, nullable=False),  # "<answerer>/<item_id>"
    pa.field("answerer", S),  # the name of the evaluated model (fakebench.models[].name)
    pa.field("item_id", S),
    pa.field("task", S),  # fakeclass | fakeclue | fakeqa
    pa.field("sample_id", S),
    pa.field("label", S),
    pa.field("reply", S),  # the raw reply
    pa.field("response", S),  # the text scored: the reply, or FakeClue's <reasoning>
    pa.field("verdict", S),  # fakeclue: the <answer> after the reasoning (real | fake | null)
    pa.field("parse_error", S),  # fakeclue: why no verdict could be read
    # a null response on purpose: why the model gave no answer (a detector asked about a
    # dimension it does not measure)
    pa.field("null_reason", S),
    *USAGE_FIELDS,
)
