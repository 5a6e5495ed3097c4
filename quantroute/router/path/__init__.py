"""The request path: policy in force, canary arm, decision, node choice, forwarding and shadow copies."""
