"""The releases' formats: one reader per benchmark layout (``fakeclue``, ``loki``, ``sofake``,
``aigi_holmes``), what they share (``records``), the registry (``importers``) and the reply
rules (``replies``). Below the stages: pure reads through ``forenset.paths``."""
