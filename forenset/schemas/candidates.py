import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema

# Carried columns let Edit-Check and explanations read one table instead of joining four.
SCHEMA = stage_schema(
    pa.field("candidate_id", S, nullable=False),
    pa.field("instruction_id", S),
    pa.field("image_id", S),
    pa.field("generator", S),
    pa.field("generator_family", S),
    pa.field("source_blob", S),
    pa.field("blob", S),
    pa.field("width", I64),
    pa.field("height", I64),
    pa.field("caption", S),
    pa.field("instruction", S),  # JSON of the instruction row's edit fields
    pa.field("kind", S),
    pa.field("family", S),
    pa.field("params", S),  # JSON: generation parameters actually used
    pa.field("truth", S),  # JSON ground truth known to the generator (fault injected...)
    pa.field("latency_s", F64),
)
