import pyarrow as pa

from forenset.schemas.common import I64, USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("image_id", S, nullable=False),
    pa.field("blob", S),
    pa.field("width", I64),
    pa.field("height", I64),
    pa.field("caption", S),
    pa.field("caption_source", S),  # manifest | offline | model
    pa.field("entities", S),  # JSON list of {name, bbox, [area, mean_rgb]}
    pa.field("license", S),
    pa.field("model_entities", S),  # JSON list of noun phrases a caption model named
    *USAGE_FIELDS,
)
