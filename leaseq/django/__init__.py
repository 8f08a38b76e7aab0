"""leaseq as a backend of Django's Tasks framework (``django.tasks``, or the
``django-tasks`` backport before Django 6): ``leaseq.django.LeaseqBackend``.
Install with ``pip install 'leaseq[django]'``; see docs/django.md."""

from leaseq.django.backend import LeaseqBackend

__all__ = ["LeaseqBackend"]
