import pyarrow as pa

from forenset.schemas.common import I64, S, stage_schema

SCHEMA = stage_schema(
    pa.field("item_id", S, nullable=False),  # <benchmark>/<task>/<record_id>
    pa.field("benchmark", S),  # fakeclue | loki | sofake_ood | aigi_holmes
    pa.field("task", S),  # judgement | multiple_choice | explanation
    pa.field("record_id", S),  # the release's id (or image path) of the record
    pa.field("label", S),  # real | fake (null: a multiple-choice pair)
    pa.field("kind", S),  # the release's finer class (So-Fake: full_synthetic / tampered / real)
    pa.field("category", S),  # the release's category (FakeClue cate, LOKI doc/animal/…)
    pa.field("generator", S),
    pa.field("question", S),  # what the model is asked, in the release's wording
    pa.field("choices", pa.list_(S)),  # multiple choice: the options, A, B, …
    pa.field("answer", S),  # gold: real | fake, or the option letter
    pa.field("asks", S),  # a yes/no question asks about: real | fake
    pa.field("reference", S),  # the reference explanation, where the release has one
    pa.field("regions", S),  # JSON [{region: [x, y, w, h], desc}] (LOKI anomalies)
    pa.field("blobs", pa.list_(S)),  # the images, in the question's order
    pa.field("n_images", I64),
)
