"""What the threaded and the asyncio workers share: the outcome policy, handler
time limits, signal handling."""
