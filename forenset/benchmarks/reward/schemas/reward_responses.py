import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, B, S, stage_schema

SCHEMA = stage_schema(
    pa.field("response_id", S, nullable=False),  # "<policy>/<reward_image_id>"
    pa.field("policy", S),
    pa.field("policy_kind", S),  # detector | constant | llm | file
    pa.field("reward_image_id", S),
    pa.field("image_id", S),
    pa.field("generator", S),
    pa.field("label", S),  # the truth: real | fake
    pa.field("blob", S),  # the image the policy saw (carried for the judges)
    pa.field("verdict", S),  # y: real | fake | null (no one-word verdict: a wrong detection)
    pa.field("correct", B),  # y == l(I)
    pa.field("explanation", S),  # e
    pa.field("reply", S),  # r as the policy wrote it (what judges and annotators read)
    pa.field("parse_error", S),  # why no verdict could be read (one sentence)
    *USAGE_FIELDS,
)
