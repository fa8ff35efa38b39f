"""The stores: the recorded JSON files (baselines, the loaders' counts) read, locked and written."""
