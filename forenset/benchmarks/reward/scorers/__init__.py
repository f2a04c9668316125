"""Building blocks of the reward benchmark (XAIGID-RewardBench): the 4-way choice space, its
metrics (Acc(4), Acc(2), Elo, Bradley-Terry, agreement), the policy-reply parser and the
offline rule judge. Pure functions over plain values: the reward stages call them."""
