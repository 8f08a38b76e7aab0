"""``manage.py leaseq_worker``: a leaseq worker over a Django Tasks backend's queues,
in this process or, with ``--processes N``, in N children under leaseq's supervisor.

A child is ``python -m django leaseq_worker`` with the same settings module,
``sys.path`` and options (no ``--processes``), plus the hidden ``--status-fd``
on which it reports handlers that run on after their job was given up, as
``leaseq worker``'s children do (``leaseq.supervisor``)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseq.django.backend import LeaseqBackend
from leaseq.errors import LeaseqError
from leaseq.queue import Queue
from leaseq.queue_set import parse_queue_spec
from leaseq.store import validate as v
from leaseq.supervisor import ProcessSupervisor, report_stuck, watch_parent
from leaseq.worker import Worker

try:  # Django 6.0 and later
    from django.tasks import task_backends
except ImportError:  # the django-tasks backport
    from django_tasks import task_backends  # type: ignore[no-redef]


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run a leaseq worker on the queues of a Django Tasks backend (its QUEUES, "
        "first listed first), until SIGTERM/SIGINT; with --processes N, N of them "
        "as child processes under a supervisor."
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
            "--grace",
            type=float,
            default=30.0,
            help="Seconds in-flight tasks get to finish after SIGTERM (default 30).",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="Seconds a task may run when its job sets no timeout (default: no limit).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Return once nothing is ready or running."
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=None,
            help="Run N worker processes under a supervisor (CPU-bound tasks scale with "
            "cores); it restarts one that dies and forwards SIGTERM/SIGINT.",
        )
        parser.add_argument(
            "--kill-grace",
            type=float,
            default=5.0,
            help="With --processes: seconds a task may run on after its job was given up "
            "(past its timeout, or cancelled) before its process is killed and replaced "
            "(default 5).",
        )
        # A supervised child's status pipe (leaseq.supervisor).
        parser.add_argument("--status-fd", type=int, default=None, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = _backend(options["backend"])
        try:
            _check_numbers(options)
            queues, weights = _queues(backend, options["queues"])
            if options["processes"] is not None:
                supervisor = _supervisor(backend, options)
                for q in queues:  # one read before any child starts: a bad URL is one line
                    q.stats()
            else:
                worker = _worker(backend, queues, weights, options)
        except LeaseqError as exc:
            raise CommandError(str(exc)) from None
        names = ",".join(q.name for q in queues)
        if options["processes"] is not None:
            self.stdout.write(
                f"leaseq supervisor: {supervisor.processes} worker processes on {names} "
                f"(backend {backend.alias!r})"
            )
            code = supervisor.run()
            if code:
                raise SystemExit(code)
            return
        self.stdout.write(f"leaseq worker on {names} (backend {backend.alias!r})")
        if options["status_fd"] is not None:
            watch_parent(worker.stop)  # an orphaned child stops instead of running on
        worker.run(burst=options["burst"])


def _backend(alias: str) -> LeaseqBackend:
    try:
        backend = task_backends[alias]
    except Exception as exc:  # InvalidTaskBackend(Error), by Django version
        raise CommandError(f"--backend {alias!r}: {exc}") from None
    if not isinstance(backend, LeaseqBackend):
        raise CommandError(f"TASKS[{alias!r}] is not a leaseq backend")
    return backend


def _check_numbers(options: dict[str, Any]) -> None:
    """Every number of the command checked, named as typed (InvalidArgument)."""
    v.integer(options["concurrency"], "--concurrency", 1, v.MAX_CONCURRENCY)
    v.ttl_ms(options["ttl"], "--ttl")
    v.seconds_to_ms(options["grace"], "--grace", minimum_ms=0, maximum=math.inf)
    v.timeout_ms(options["timeout"], "--timeout")
    if options["processes"] is not None:
        v.integer(options["processes"], "--processes", 1, 1024)
        v.seconds_to_ms(options["kill_grace"], "--kill-grace", minimum_ms=0, maximum=v.MAX_TIMEOUT)


def _queues(backend: LeaseqBackend, spec: str | None) -> tuple[list[Queue], list[int] | None]:
    """The queues to serve (``--queues``, else the backend's QUEUES) and their weights."""
    names, weights = parse_queue_spec(spec) if spec else (backend.queue_names, None)
    if not names:
        raise CommandError(
            f"TASKS[{backend.alias!r}] has QUEUES []: any queue, so say which "
            "to serve with --queues"
        )
    return [backend.queue(name) for name in names], weights


def _worker(
    backend: LeaseqBackend, queues: list[Queue], weights: list[int] | None, options: dict[str, Any]
) -> Worker:
    fd = options["status_fd"]
    return Worker(
        queues if len(queues) > 1 else queues[0],
        backend.handler(),
        weights=weights if len(queues) > 1 else None,
        concurrency=options["concurrency"],
        ttl=options["ttl"],
        grace=options["grace"],
        timeout=options["timeout"],
        on_stuck=None if fd is None else report_stuck(fd),
    )


def _supervisor(backend: LeaseqBackend, options: dict[str, Any]) -> ProcessSupervisor:
    """The supervisor of ``--processes`` children: each this command without
    ``--processes``, under the same settings module and ``sys.path``."""
    module = getattr(settings, "SETTINGS_MODULE", None)
    if not module:
        raise CommandError(
            "--processes starts each worker as `python -m django leaseq_worker`, which "
            "needs a settings module (DJANGO_SETTINGS_MODULE or --settings), not "
            "settings.configure()"
        )
    argv = [sys.executable, "-m", "django", "leaseq_worker", "--settings", module]
    argv += ["--skip-checks", "--verbosity", str(options["verbosity"])]
    argv += ["--backend", backend.alias, "--concurrency", str(options["concurrency"])]
    argv += ["--ttl", repr(float(options["ttl"])), "--grace", repr(float(options["grace"]))]
    for flag, value in (("--queues", options["queues"]), ("--timeout", options["timeout"])):
        if value is not None:
            argv += [flag, str(value)]
    for flag in ("burst", "traceback", "no_color", "force_color"):
        if options.get(flag):
            argv.append("--" + flag.replace("_", "-"))
    return ProcessSupervisor(
        argv,
        processes=options["processes"],
        kill_grace=options["kill_grace"],
        burst=options["burst"],
        # What this process imports (manage.py's folder, --pythonpath), the children import.
        env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if isinstance(p, str))},
        cwd=os.getcwd(),
        name=f"{options['queues'] or ','.join(backend.queue_names)} (backend {backend.alias!r})",
    )
