"""``manage.py leaseq_worker``."""
