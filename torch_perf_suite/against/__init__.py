"""Another commit measured: --perf-against REF (its state in one object the session holds) and --perf-bisect."""
