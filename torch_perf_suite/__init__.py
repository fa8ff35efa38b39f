"""How the suite measures: timing, sync counting, baselines, the report, the pytest plugin."""
