from forenset.schemas.scores import long_score_schema

# One row per (table, subject, group, labels_from, metric); score_id is
# "<table>/<subject>/<group>/<labels_from or ->/<metric>".
SCHEMA = long_score_schema(
    # policy_accuracy (Tables 1-2) | elo (Tables 3, 5) | judge_accuracy (Table 4)
    # | position_bias (Fig. 3, per rater) | agreement (inter-annotator)
    "table",
    "subject",  # a policy, a judge, or "annotators"
    "group",  # overall | real | fake | <generator> | shown | swapped | 4-way | clear
    "labels_from",  # human | simulated | <judge>: whose labels made the games
    "labels_source",  # human | simulated: the ground truth compared against
)
