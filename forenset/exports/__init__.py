"""Dataset exports (HF Parquet + card, SFT JSONL, FakeBench QA, Label Studio) read from the run store."""
