"""Real vLLM fleets: start one vLLM server per node of a real-fleet file, wait until each answers, register it
with a router through the registrar, and stop every process group on the way out."""
