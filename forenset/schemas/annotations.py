"""annotations: a Label Studio JSON export read back (``forenset import-annotations``), one row
per choice or region of each annotation. Written by the importer, not by a stage; kept here so
the query views can type an empty table without importing the exporters."""

import pyarrow as pa

SCHEMA = pa.schema(
    [
        pa.field("annotation_row_id", pa.string(), nullable=False),
        pa.field("task_id", pa.int64()),
        pa.field("annotation_id", pa.int64()),
        pa.field("sample_id", pa.string()),
        pa.field("task", pa.string()),  # triage | bbox | other (from the control name)
        pa.field("annotator", pa.string()),
        pa.field("result_type", pa.string()),
        pa.field("choice", pa.string()),
        pa.field("rect_label", pa.string()),
        pa.field("x", pa.float64()),  # box as fractions of the image
        pa.field("y", pa.float64()),
        pa.field("w", pa.float64()),
        pa.field("h", pa.float64()),
        pa.field("rotation", pa.float64()),  # degrees, about the box's top-left corner (LS)
        pa.field("region_id", pa.string()),  # LS result id; forenset's "<sample>-<diff id>"
        pa.field("difference_id", pa.string()),  # the diff a kept pre-annotation came from
        pa.field("origin", pa.string()),  # prediction | prediction-changed | drawn
        pa.field("region_text", pa.string()),  # the per-region "why" explanation
        pa.field("was_cancelled", pa.bool_()),
        pa.field("created_at", pa.string()),
        pa.field("lead_time", pa.float64()),
        pa.field("simulated", pa.bool_()),  # rows written by a simulated annotator
        pa.field("source_file_hash", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
    ]
)
