"""Pinned copies of earlier code, for benchmarks only (never imported by the package)."""
