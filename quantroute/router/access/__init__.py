"""Client access at the router: API keys looked up in memory (keys.py), refreshed from the database, and the
per-tenant and per-key rate limits (limits.py) that answer 429 with Retry-After."""
