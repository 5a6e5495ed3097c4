"""Live shadow comparison: a sampled greedy request answered by two deployments, the pair compared
(`compare`), read back from a response body (`response`), and analysed over many pairs (`analysis`). Pure code
only: the router sends the shadows (`router.shadow`), the database stores the pairs (`db.shadow_pair`)."""
