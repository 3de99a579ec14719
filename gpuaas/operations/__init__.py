"""Use cases without Prefect: each module plans (pure) and applies (I/O), typed in and out."""
