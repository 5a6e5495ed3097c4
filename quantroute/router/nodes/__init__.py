"""The fleet as the router sees it: node state and load, membership sync, the HTTP client to nodes."""
