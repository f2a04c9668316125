from forenset.schemas.scores import long_score_schema

# One row per (answerer, benchmark, task, group_kind, group, metric); score_id is
# "<answerer>/<benchmark>/<task>/<group_kind>=<group>/<metric>".
SCHEMA = long_score_schema(
    "answerer",
    "benchmark",
    "task",  # judgement | multiple_choice | explanation
    "group_kind",  # all | label | kind | category | generator
    "group",
)
