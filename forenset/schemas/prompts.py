import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, S, stage_schema

# The row key is prompt_uid: ``prompt_id`` is the trace column naming the LLM template.
SCHEMA = stage_schema(
    pa.field("prompt_uid", S, nullable=False),
    pa.field("scenario_id", S),
    pa.field("category", S),
    pa.field("group", S),
    pa.field("media_form", S),
    pa.field("content", S),
    pa.field("who", S),
    pa.field("what", S),
    pa.field("when", S),
    pa.field("where", S),
    pa.field("why", S),
    pa.field("how", S),
    pa.field("prompt", S),  # the text-to-image prompt
    pa.field("fields", S),  # JSON 5W+1H
    pa.field("scenario", S),  # JSON Scenario
    pa.field("constraints", pa.list_(S)),
    pa.field("synthetic_values", S),  # JSON fictional names / amounts used (I2, I3)
    pa.field("source", S),  # template | llm
    pa.field("builder", S),
    *USAGE_FIELDS,
)
