import pyarrow as pa

from forenset.schemas.common import F64, USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("detection_id", S, nullable=False),  # "<detector>/<track>/<eval_item_id>"
    pa.field("detector", S),
    pa.field("track", S),  # complex | simple (App. 16.0.0.2: one prompt per track)
    pa.field("eval_item_id", S),
    pa.field("eval_set", S),  # id | ood
    pa.field("sample_id", S),
    pa.field("variant", S),  # the eval item's propagation variant: 0x (clean) | 1x | 2x | 3x
    pa.field("label", S),  # the truth: real | fake
    pa.field("answer", S),  # real | fake | null (unparseable: a wrong prediction)
    pa.field("parse_error", S),  # why the answer could not be parsed (one sentence)
    pa.field("explanation", S),  # the <reasoning> text of this track
    pa.field("fake_probability", F64),  # detectors that score (offline); null otherwise
    pa.field("bbox", S),  # JSON [x0, y0, x1, y1] (0..1) of the grounded region, if any
    pa.field("reply", S),  # the raw reply / file line the answer was parsed from
    *USAGE_FIELDS,
)
