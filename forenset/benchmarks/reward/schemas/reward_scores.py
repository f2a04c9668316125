import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema

SCHEMA = stage_schema(
    pa.field("score_id", S, nullable=False),  # "<table>/<subject>/<group>/<labels_from>"
    # policy_accuracy (Tables 1-2) | elo (Tables 3, 5) | judge_accuracy (Table 4)
    # | position_bias (Fig. 3, per rater) | agreement (inter-annotator)
    pa.field("table", S),
    pa.field("subject", S),  # a policy, a judge, or "annotators"
    pa.field("group", S),  # overall | real | fake | <generator> | shown | swapped | both
    pa.field("labels_from", S),  # human | simulated | <judge>: whose labels made the games
    pa.field("labels_source", S),  # human | simulated: the ground truth compared against
    pa.field("value", F64),  # the table's headline number (accuracy, mean Elo, agreement, bias)
    pa.field("n", I64),
    pa.field("acc4", F64),
    pa.field("acc2", F64),
    pa.field("n2", I64),  # |T2|: labelled triplets with a clear winner
    pa.field("elo", F64),  # mean over shuffled game orders
    pa.field("elo_std", F64),
    pa.field("bt", F64),  # Bradley-Terry on the Elo scale
    pa.field("games", I64),
    pa.field("wins", I64),
    pa.field("losses", I64),
    pa.field("ties", I64),
    pa.field("both_bad", I64),
    pa.field("win_rate", F64),
    pa.field("rank", I64),
    pa.field("extra", S),  # JSON details (choice shares, pair counts, swap consistency)
)
