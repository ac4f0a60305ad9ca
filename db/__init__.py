"""The DuckDB store: schema and migrations, upserts, and the queries the CLI and reports use."""
