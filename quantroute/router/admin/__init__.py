"""Everything that is not a completion: health, models, metrics, the admin API and the worker peers."""
