"""XAIGID-RewardBench: judged response triplets, their labels and the reward tables."""

from forenset.families import Family

_P = "forenset.benchmarks.reward"
_T = f"{_P}.scorers.tables"
_A = f"{_P}.scorers.arena"

FAMILY = Family(
    name="reward",
    title="XAIGID-RewardBench",
    stages={
        "reward_images": f"{_P}.stages.reward_images:RewardImages",
        "reward_responses": f"{_P}.stages.reward_responses:RewardResponses",
        "reward_triplets": f"{_P}.stages.reward_triplets:RewardTriplets",
        "reward_judgments": f"{_P}.stages.reward_judgments:RewardJudgments",
        "reward_labels": f"{_P}.stages.reward_labels:RewardLabels",
        "reward_scores": f"{_P}.stages.reward_scores:RewardScores",
    },
    config_section="reward",
    config=f"{_P}.config:RewardConfig",
    metrics={  # Tables 1-2, Table 4, Fig. 3, agreement, Tables 3/5
        "accuracy": f"{_T}:ACCURACY",
        "acc4": f"{_T}:ACC4",
        "acc2": f"{_T}:ACC2",
        "share_First": f"{_T}:SHARE_FIRST",
        "share_Second": f"{_T}:SHARE_SECOND",
        "share_Tie": f"{_T}:SHARE_TIE",
        "share_BothBad": f"{_T}:SHARE_BOTHBAD",
        "position_bias": f"{_T}:POSITION_BIAS",
        "swap_consistency": f"{_T}:SWAP_CONSISTENCY",
        "agreement": f"{_T}:AGREEMENT",
        "rank": f"{_A}:RANK",
        "elo": f"{_A}:ELO",
        "elo_std": f"{_A}:ELO_STD",
        "bt": f"{_A}:BT",
        "games": f"{_A}:GAMES",
        "wins": f"{_A}:WINS",
        "losses": f"{_A}:LOSSES",
        "ties": f"{_A}:TIES",
        "both_bad": f"{_A}:BOTH_BAD",
        "win_rate": f"{_A}:WIN_RATE",
    },
    responder_kinds=("detector", "llm", "file", "constant"),
    cli=f"{_P}.cli:app",
    report=f"{_P}.report:reward_section",
)
