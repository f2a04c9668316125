import pyarrow as pa

from forenset.schemas.common import I64, USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("explanation_id", S, nullable=False),
    pa.field("sample_id", S),
    pa.field("label", S),
    pa.field("split", S),
    pa.field("kind", S),  # complex | simple | authenticity
    pa.field("text", S),
    pa.field("entities_mentioned", pa.list_(S)),
    pa.field("n_words", I64),
    pa.field("attempts", I64),
    *USAGE_FIELDS,
)
