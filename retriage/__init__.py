"""retriage: LLM inference-engine issues in DuckDB, with root-cause classes, components and known fixes."""

__version__ = "0.1.0"
