"""Prometheus metrics: the per-app registry and the plain-number series the request path updates."""
