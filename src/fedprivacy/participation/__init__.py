"""Who participates in each round, and what the server can learn from the aggregates it sees."""
