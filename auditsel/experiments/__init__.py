"""Experiments: a config in, a result out (the flow behind `auditsel run`): config, experiment,
sweep, one_run_experiment, config_plan and bounds_cache (docs/explanation/architecture.md)."""
