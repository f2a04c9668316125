"""SafeIMG's benchmark: triage and region sets from the human annotations, its Table 2/3
scores and report section (no stages of its own).

Core follows the paper for the dataset this benchmark reads: the safety taxonomy's scenario
instances s = (R_c, e, m) (``forenset.tasks.scenarios``, ``forenset.text.taxonomy``) and the
§2.5 annotation, the triage + region Label Studio pair (``forenset.exports.labelstudio``),
whose project key ``CORE_PROJECT`` is still ``"safeimg"`` (docs/safeimg.md)."""

from forenset.families import Family

_P = "forenset.benchmarks.safeimg"

FAMILY = Family(
    name="safeimg",
    title="SafeIMG",
    metrics={  # SafeIMG Table 2 (eq. 12), real-image accuracy, Table 3, App. A (eq. 13)
        "detection_rate": f"{_P}.scorers:DETECTION_RATE",
        "real_accuracy": f"{_P}.scorers:REAL_ACCURACY",
        "human_covered": f"{_P}.scorers:HUMAN_COVERED",
        "ai_supported": f"{_P}.scorers:AI_SUPPORTED",
        "hit_rate": f"{_P}.scorers:HIT_RATE",
        "delta": f"{_P}.scorers:DELTA",
    },
    cli=f"{_P}.cli:app",
    report=f"{_P}.report:safeimg_section",
)
