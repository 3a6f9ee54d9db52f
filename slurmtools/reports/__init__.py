"""Utilization reports: what the GPUs did, who used them, what it cost, where capacity went to waste.

Flow: `sacct.read_sacct` / `epilog.read_epilog_dir` / `capacity.*` (reading text) -> `metrics.compute` (pure
pandas) -> `forecast` (pure) -> `outputs` (HTML, CSV, Markdown, JSON). `cache.DayCache` keeps finished days as
Parquet files so a nightly run parses only the new day.
"""
