"""The Django app (``INSTALLED_APPS += ["leaseq.django"]``) that brings
``manage.py leaseq_worker``."""

from __future__ import annotations

from django.apps import AppConfig


class LeaseqConfig(AppConfig):  # type: ignore[misc]
    name = "leaseq.django"
    label = "leaseq"
    verbose_name = "leaseq"
