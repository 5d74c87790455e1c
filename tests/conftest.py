"""The test tree mirrors the package (tests/accounting, tests/auditing, ...; cross-cutting
tests at the top). pytest puts this folder on sys.path, so every test imports the shared
helpers as `import oracles` (and `figure_records`)."""
