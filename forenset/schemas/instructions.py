import pyarrow as pa

from forenset.schemas.common import F64, I64, USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("instruction_id", S, nullable=False),
    pa.field("image_id", S),
    pa.field("blob", S),
    pa.field("caption", S),
    pa.field("idx", I64),
    pa.field("text", S),
    pa.field("family", S),  # person | object | geometry | scene
    pa.field("kind", S),
    pa.field("target", S),
    pa.field("location_hint", S),
    pa.field("bbox", pa.list_(F64)),  # target entity box, fractions
    pa.field("change_bbox", pa.list_(F64)),  # where the visible change is expected
    pa.field("expected_change", S),
    pa.field("difficulty", I64),
    pa.field("params", S),  # JSON: kind-specific concrete parameters (colour, offset...)
    pa.field("attempts", I64),  # generations until the set passed validation
    *USAGE_FIELDS,
)
