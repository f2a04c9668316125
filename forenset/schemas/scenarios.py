import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("scenario_id", S, nullable=False),
    pa.field("category", S),  # taxonomy id, P1-P8 / I1-I4
    pa.field("category_name", S),
    pa.field("group", S),  # public | individual
    pa.field("content", S),
    pa.field("media_form", S),
    pa.field("detail", S),
    pa.field("risk_focus", S),
    pa.field("source", S),  # template | llm
    pa.field("scenario", S),  # JSON of the whole Scenario (risk summary, content, media form...)
    *USAGE_FIELDS,
)
