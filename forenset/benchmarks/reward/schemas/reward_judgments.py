import pyarrow as pa

from forenset.schemas.common import USAGE_FIELDS, S, stage_schema

SCHEMA = stage_schema(
    pa.field("judgment_id", S, nullable=False),  # "<judge>/<order>/<triplet_id>"
    pa.field("judge", S),
    pa.field("triplet_id", S),
    pa.field("order", S),  # shown (as annotators saw it) | swapped (responses exchanged)
    pa.field("choice", S),  # First | Second | Tie | BothBad as the judge answered; null: unparsed
    pa.field("choice_shown", S),  # the choice in the shown order (swapped: First <-> Second)
    pa.field("elaboration", S),
    pa.field("reply", S),
    pa.field("parse_error", S),
    *USAGE_FIELDS,
)
