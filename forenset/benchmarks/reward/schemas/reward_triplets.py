import pyarrow as pa

from forenset.schemas.common import I64, B, S, stage_schema

SCHEMA = stage_schema(
    pa.field("triplet_id", S, nullable=False),  # "<reward_image_id>#<k>"
    pa.field("reward_image_id", S),
    pa.field("image_id", S),
    pa.field("generator", S),
    pa.field("label", S),
    pa.field("blob", S),
    pa.field("pair", S),  # "<policy>|<policy>" in name order (the round-robin pair)
    pa.field("first_policy", S),  # shown first (after scrambling)
    pa.field("second_policy", S),
    pa.field("first_response_id", S),
    pa.field("second_response_id", S),
    pa.field("first_reply", S),
    pa.field("second_reply", S),
    pa.field("swapped", B),  # the shown order is the reverse of the pair's name order
    pa.field("position", I64),  # place of the triplet in the scrambled presentation order
)
