"""Session pins: the in-memory store, the group committer of new pins and the database connection it uses."""
