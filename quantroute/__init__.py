"""quantroute: precision-tiered routing, paired evals and canaries for LLMs served at several precisions."""

__version__ = "0.1.0"
