import pyarrow as pa

from forenset.schemas.common import B, S, stage_schema

SCHEMA = stage_schema(
    pa.field("sample_id", S, nullable=False),
    pa.field("label", S),  # real | fake
    pa.field("image_id", S),
    pa.field("candidate_id", S),
    pa.field("generator", S),
    pa.field("generator_family", S),
    pa.field("generators", pa.list_(S)),  # every generator that made these exact bytes
    pa.field("split", S),
    pa.field("holdout", B),
    pa.field("blob", S),
    pa.field("source_blob", S),
    pa.field("caption", S),
    pa.field("instruction", S),
    pa.field("differences", S),
    pa.field("entities", S),
)
