"""Results: the one result document every route writes, and its readings (its modules, from
`fields` to `result`: docs/explanation/architecture.md, layer 7)."""
