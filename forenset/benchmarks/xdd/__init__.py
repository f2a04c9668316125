"""The XPlainVerse challenge (Explainable Deepfake Detection Challenge 2026, CodaBench): its
submission and reference formats and its leaderboard scores (``docs/xdd.md``)."""
