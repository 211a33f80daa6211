"""The Dagster jobs the CLI starts in this process (or on the configured executor), their
instance folder, and the progress loggers of those runs."""
