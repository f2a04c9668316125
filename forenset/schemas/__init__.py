"""Arrow schemas, one module per stage table."""

from forenset.schemas.common import TRACE_FIELDS, TRACE_NAMES, VOLATILE, stage_schema

__all__ = ["TRACE_FIELDS", "TRACE_NAMES", "VOLATILE", "stage_schema"]
