"""Dataset exports (HF Parquet + card, SFT JSONL, Label Studio, the benchmark families' formats)
read from the run store."""
