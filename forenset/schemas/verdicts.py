import pyarrow as pa

from forenset.schemas.common import F64, I64, B, S, stage_schema
from forenset.schemas.judgments import CARRY
from forenset.schemas.judgments import SCHEMA as JUDGMENTS

_carry = [JUDGMENTS.field(n) for n in CARRY]

SCHEMA = stage_schema(
    *_carry,
    pa.field("n_judges", I64),
    pa.field("score", F64),  # the judges' final scores combined by the rule
    pa.field("verdict", S),  # KEEP | BORDERLINE | DISCARD
    pa.field("failure_category", S),
    pa.field("rationale", S),
    pa.field("aggregation", S),  # rule version + thresholds, so a verdict can be traced
    pa.field("keep", B),  # after the BORDERLINE policy
    pa.field("review", B),
)
