"""Paired evals: a suite of items, graders, a runner that asks two arms (baseline and candidate deployments) the
same questions with the same decode parameters, paired statistics and the eval gate that decides whether a
quantized deployment does the job as well as the baseline."""
