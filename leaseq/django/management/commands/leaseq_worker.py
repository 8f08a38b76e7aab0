"""``manage.py leaseq_worker``: a leaseq worker over a Django Tasks backend's queues."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseq.django.backend import LeaseqBackend
from leaseq.errors import LeaseqError
from leaseq.queue_set import parse_queue_spec
from leaseq.worker import Worker

try:  # Django 6.0 and later
    from django.tasks import task_backends
except ImportError:  # the django-tasks backport
    from django_tasks import task_backends  # type: ignore[no-redef]


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run a leaseq worker on the queues of a Django Tasks backend (its QUEUES, "
        "first listed first), until SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="The TASKS alias.")
        parser.add_argument(
            "--queues",
            default=None,
            help="high,default,low (strict order) or high:5,default:3,low:1 (weighted); "
            "default: the backend's QUEUES in strict order.",
        )
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--ttl", type=float, default=30.0, help="Lease seconds.")
        parser.add_argument(
            "--burst", action="store_true", help="Return once nothing is ready or running."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backend = task_backends[options["backend"]]
        except Exception as exc:  # InvalidTaskBackend(Error), by Django version
            raise CommandError(f"--backend {options['backend']!r}: {exc}") from None
        if not isinstance(backend, LeaseqBackend):
            raise CommandError(f"TASKS[{options['backend']!r}] is not a leaseq backend")
        try:
            names, weights = (
                parse_queue_spec(options["queues"])
                if options["queues"]
                else (backend.queue_names, None)
            )
            if not names:
                raise CommandError(
                    f"TASKS[{options['backend']!r}] has QUEUES []: any queue, so say which "
                    "to serve with --queues"
                )
            queues = [backend.queue(name) for name in names]
            worker = Worker(
                queues if len(queues) > 1 else queues[0],
                backend.handler(),
                weights=weights if len(queues) > 1 else None,
                concurrency=options["concurrency"],
                ttl=options["ttl"],
            )
        except LeaseqError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"leaseq worker on {worker.queue.name} (backend {backend.alias!r})")
        worker.run(burst=options["burst"])
