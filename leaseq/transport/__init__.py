"""The only I/O: running the store's steps on redis-py (sync or asyncio), mapping
its errors, connecting from URLs, and the embedded ``memory://`` server."""
