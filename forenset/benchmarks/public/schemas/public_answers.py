import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("answer_id", S, nullable=False),  # "<answerer>/<item_id>"
    pa.field("answerer", S),  # public.models[].name
    pa.field("item_id", S),
    pa.field("benchmark", S),
    pa.field("task", S),
    pa.field("reply", S),  # the raw reply
    pa.field("verdict", S),  # judgement: real | fake | null (unreadable)
    pa.field("choice", S),  # multiple choice: the option letter | null
    pa.field("explanation", S),  # the text scored against the reference
    pa.field("parse_error", S),  # why no verdict / choice could be read
    *USAGE_FIELDS,
)
