import pyarrow as pa

from forenset.schemas.common import I64, S, stage_schema

SCHEMA = stage_schema(
    pa.field("image_id", S, nullable=False),
    pa.field("source", S),  # sample | folder | csv
    pa.field("name", S),
    pa.field("uri", S),
    pa.field("sha256", S),  # of the original bytes
    pa.field("blob", S),  # normalised RGB PNG in the blob store
    pa.field("width", I64),
    pa.field("height", I64),
    pa.field("orig_width", I64),
    pa.field("orig_height", I64),
    pa.field("orig_mode", S),
    pa.field("orig_format", S),
    pa.field("normalisations", pa.list_(S)),
    pa.field("license", S),
    pa.field("caption", S),  # from the manifest, when shipped
    pa.field("entities", S),  # JSON list of {name, bbox}
)
