import pyarrow as pa

from forenset.schemas.common import I64, B, S, stage_schema

SCHEMA = stage_schema(
    pa.field("triplet_id", S, nullable=False),
    pa.field("source", S),  # human (a Label Studio export) | simulated (the noisy rule)
    pa.field("label", S),  # H_t: First | Second | Tie | BothBad; null while tied
    pa.field("resolved_by", S),  # majority | manual | null (tied: listed for resolution)
    pa.field("tied", B),  # the kept annotations' top counts tie
    pa.field("n_annotations", I64),  # kept (at or over the minimum lead time)
    pa.field("n_dropped", I64),  # faster than the minimum lead time
    pa.field("votes", S),  # JSON {choice: count} of the kept annotations
    pa.field("annotations", S),  # JSON [{annotator, choice, lead_time, dropped}]
)
