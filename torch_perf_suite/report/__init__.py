"""What a run says: the report (Markdown, plain text, charts), a failure's first line, the nightly's trend."""
