import pyarrow as pa

from forenset.schemas.common import F64, I64, B, S, stage_schema

SCHEMA = stage_schema(
    pa.field("eval_item_id", S, nullable=False),  # "<eval_set>/<sample_id>[@<level>x]"
    pa.field("eval_set", S),  # id | ood
    pa.field("sample_id", S),
    pa.field("label", S),  # real | fake
    pa.field("image_id", S),
    pa.field("generator", S),
    pa.field("generator_family", S),
    pa.field("holdout", B),
    pa.field("split", S),
    pa.field("blob", S),  # the clean image, or its propagated copy for a level above 0
    pa.field(
        "variant", S
    ),  # "0x" (clean) | "1x" | "2x" | "3x" (re-sharing rounds) | "<family>:<severity>"
    pa.field("propagation", I64),  # the variant's number of re-sharing rounds (0-3)
    pa.field("rank", I64),
    # a catalogue perturbation (evaluation.perturbations): its family, severity and op record
    pa.field("perturbation_family", S),  # null for clean and propagated items
    pa.field("severity", F64),  # 0 = the easy end of every parameter, 1 = the hard end
    pa.field(
        "ops", S
    ),  # JSON [{name, family, params}] (replay: perturbations.apply_record)  # position in the set's seeded draw: fakes first, then reals
)
