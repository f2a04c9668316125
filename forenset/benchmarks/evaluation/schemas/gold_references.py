"""``gold_references``: human-written reference explanations (XPlainVerse §4, App. 14),
imported from a Label Studio export of the gold task (``forenset.benchmarks.evaluation.gold``)
or from an XDD challenge reference JSONL (``forenset.benchmarks.xdd.gold``). Not written by a
stage: ``forenset import-gold`` / ``forenset xdd-import-gold`` write it, one shard per file."""

import pyarrow as pa

from forenset.schemas.common import F64, I64, B, S

SCHEMA = pa.schema(
    [
        pa.field("gold_id", S, nullable=False),  # "<task id>-<annotation id>" of the export
        pa.field("task_id", I64),
        pa.field("annotation_id", I64),
        pa.field("sample_id", S),  # the fake sample explained
        pa.field("real_sample_id", S),  # the real image shown beside it (context only)
        pa.field("annotator", S),  # Label Studio's completed_by (email or id)
        pa.field("text", S),  # the explanation
        # the track it is the reference of (complex | simple); null: complex (Label Studio gold)
        pa.field("kind", S),
        pa.field("label", S),  # the truth the file gives (real | fake); null: a fake (Label Studio)
        pa.field("overlap", B),  # a task of the overlap set (several annotators each)
        pa.field("created_at", S),
        pa.field("lead_time", F64),
        pa.field("source_file_hash", S),
        pa.field("problem", S),  # error rows: the problem class (unknown_sample, empty_text, ...)
        pa.field("status", S, nullable=False),  # ok | error
        pa.field("error", S),  # one sentence per problem class
    ]
)
