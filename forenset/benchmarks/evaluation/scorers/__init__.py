"""The evaluation family's metrics (XPlainVerse Table 5), listed in its ``Family.metrics``
(``forenset/benchmarks/evaluation/__init__.py``), which the scoring registry reads."""
