"""leaseq's benchmarks, side by side with a processing-list baseline.

Run ``python -m bench`` (``--quick`` for a short pass). Never part of the
test suite: these are measurements, not assertions.
"""
