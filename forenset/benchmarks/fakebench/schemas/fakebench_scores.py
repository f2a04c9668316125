from forenset.schemas.scores import long_score_schema

# One row per (answerer, task, group_kind, group, metric); score_id is
# "<answerer>/<task>/<group_kind>=<group>/<metric>". Metrics: accuracy (FakeClass: §3.2 exact
# match; FakeClue: the CoT verdict), bleu1, bleu2, rouge_l, similarity, completeness,
# preciseness, relevance (judged, 0-2), auto_average, judged_average (0-2) and average (the
# Overall of Tables 5-7); details: n_images, and for the averages "of" (the measures covered).
SCHEMA = long_score_schema(
    "answerer",
    "task",  # fakeclass | fakeclue | fakeqa
    "group_kind",  # all | label | form | generator | mode | verdict | dimension
    "group",
)
