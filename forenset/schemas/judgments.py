import pyarrow as pa

from forenset.schemas.common import F64, USAGE_FIELDS, B, S, stage_schema
from forenset.schemas.diffs import SCHEMA as DIFFS

# The candidate columns Edit-Check carries from diffs through judgments to verdicts.
CARRY = (
    "candidate_id", "instruction_id", "image_id", "generator", "generator_family",
    "source_blob", "blob", "caption", "instruction", "kind", "family", "truth",
    "differences", "psnr", "ssim",
)  # fmt: skip
_carry = [DIFFS.field(n) for n in CARRY]

SCHEMA = stage_schema(
    *_carry,
    pa.field("judge", S),  # which judge of the pool wrote this raw record
    pa.field("match_score", F64),
    pa.field("offtarget_penalty", F64),
    pa.field("final_score", F64),
    pa.field("verdict", S),  # the judge's own KEEP | BORDERLINE | DISCARD
    pa.field(
        "failure_category", S
    ),  # none | edit_missing | edit_partial | off_target | severe_artifacts | ambiguous
    pa.field("rationale", S),
    pa.field("rule_version", S),
    pa.field("measurements", S),  # JSON: edit_strength.measure's numbers (coverage, artefacts)
    pa.field("pixel_category", S),  # the category those numbers give (the rule judge's)
    pa.field("category_grounded", B),  # false: the judge's category contradicts the pixels
    *USAGE_FIELDS,
)
