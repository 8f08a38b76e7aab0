"""What leaseq tells the world: metrics, worker metrics, tracing, logs, and how it
shows values to people (passwords hidden, times readable)."""
