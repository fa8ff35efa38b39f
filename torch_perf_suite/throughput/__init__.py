"""Throughput: timed rounds, the pipeline's parts, the gates with their tolerances, statistics."""
