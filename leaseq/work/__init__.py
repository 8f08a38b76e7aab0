"""The worker core: every decision a worker makes (claims, heartbeats, chores,
outcomes, shutdown, outages), written once without I/O, and what the threaded
and the asyncio drivers need to carry them out (docs/workers.md, "One core,
two drivers")."""
