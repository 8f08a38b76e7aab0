"""The ``leaseq`` command line (entry point ``leaseq.cli:main``)."""

from leaseq.cli.main import main

__all__ = ["main"]
