import pyarrow as pa

from forenset.schemas.candidates import SCHEMA as CANDIDATES
from forenset.schemas.common import F64, USAGE_FIELDS, S, stage_schema

_carry = [
    CANDIDATES.field(n)
    for n in (
        "candidate_id",
        "instruction_id",
        "image_id",
        "generator",
        "generator_family",
        "source_blob",
        "blob",
        "caption",
        "instruction",
        "kind",
        "family",
        "truth",
    )
]

SCHEMA = stage_schema(
    *_carry,
    pa.field(
        "differences", S
    ),  # JSON list of {id, region, change_type, description, salience, bbox, area}
    pa.field("n_differences", pa.int64()),
    pa.field("changed_frac", F64),  # share of pixels the pixel map marks as changed
    pa.field("psnr", F64),
    pa.field("ssim", F64),
    pa.field("psnr_outside", F64),  # PSNR outside the instruction's target box (preservation)
    pa.field("ssim_outside", F64),
    pa.field("lpips", F64),  # null without a local LPIPS model
    pa.field("clip_i", F64),  # null without a local image encoder
    pa.field("fidelity_note", S),  # why a fidelity value is null
    pa.field("grounding", S),  # JSON: hallucinated / missed flags vs the pixel map
    *USAGE_FIELDS,
)
