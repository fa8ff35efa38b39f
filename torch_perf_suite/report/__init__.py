"""What a run says: the report (Markdown, plain text, charts), its rows as the JSON keeps them, a failure's first line."""
