"""The evaluation family's metrics (XPlainVerse Table 5), listed in
:data:`forenset.benchmarks.common.scoring.registry.BUILTIN` under ``evaluation``."""
