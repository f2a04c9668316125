import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema

SCHEMA = stage_schema(
    pa.field("perturbation_id", S, nullable=False),
    pa.field("sample_id", S),
    pa.field("label", S),
    pa.field("split", S),
    pa.field("variant", I64),
    pa.field("clean_blob", S),
    pa.field("blob", S),
    pa.field("schedule", S),  # single | pair | chunk
    pa.field("ops", S),  # JSON ordered list of {name, family, params}
    pa.field("op_names", pa.list_(S)),
    pa.field("surrogates", pa.list_(S)),  # encoder specs the adversarial ops ran against
    pa.field("psnr", F64),
    pa.field("ssim", F64),
)
