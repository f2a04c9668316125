"""Public explainable-detection benchmarks as evaluation sets: FakeClue, LOKI, So-Fake-OOD and
AIGI-Holmes read from folders on disk in each release's own layout (one importer module each),
answered by any responder and scored with the same measures and intervals
(docs/public-benchmarks.md)."""
