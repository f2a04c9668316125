"""The dataset report (self-contained HTML) and the Prefect build-summary artifact."""
