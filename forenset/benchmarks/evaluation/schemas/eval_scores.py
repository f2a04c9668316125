"""eval_scores: long-format, one row per detector x track x eval set x group x metric.

The metrics are the evaluation family's entries in the scorer registry
(``forenset.benchmarks.common.scoring.registry``); a new one needs no change here."""

from forenset.schemas.scores import long_score_schema

GROUP_FIELDS = ("detector", "track", "eval_set", "group_kind", "group")
# detector, track (complex | simple), eval_set (id | ood), group_kind (all | generator |
# generator_family | variant | perturbation | perturbation_severity | severity), group ("all",
# a generator, a family (reals group as "real"), "1x", "noise", "noise:0.5", "0.5");
# score_id = "<detector>/<track>/<eval_set>/<group_kind>=<group>/<metric>"
SCHEMA = long_score_schema(*GROUP_FIELDS)
