"""The bug zoo: tuning pipelines written the way practitioners write them (placeholder)."""
