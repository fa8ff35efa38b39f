"""What is recorded per GPU model: the baselines file (`baselines/<gpu>.json`), and each test's seconds in pytest's
cache, which a sharded run hands its files out by."""
