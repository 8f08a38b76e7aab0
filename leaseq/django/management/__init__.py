"""The management commands of ``leaseq.django``."""
