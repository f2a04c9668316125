import pyarrow as pa

from forenset.schemas.common import I64, S, stage_schema

SCHEMA = stage_schema(
    pa.field("reward_image_id", S, nullable=False),  # "real/<image_id>" | "<generator>/<image_id>"
    pa.field("generator", S),  # "real" for the photos, else the text-to-image generator
    pa.field("generator_family", S),
    pa.field("label", S),  # real | fake (l(I) of §3.4)
    pa.field("image_id", S),  # the real photo whose caption made the fake
    pa.field("caption", S),  # the caption a fake was generated from (a real's own caption)
    pa.field("group", I64),  # the caption group (one per generator), rank % n_generators
    pa.field("blob", S),  # square-cropped PNG
    pa.field("width", I64),
    pa.field("height", I64),
)
