"""Django's settings for the Tasks backend tests: one configuration per test
process, pointing ``leaseq.django.LeaseqBackend`` at the session's real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support.servers import RedisServer

pytest.importorskip("django")


@pytest.fixture(scope="session")
def django_tasks(redis_server: RedisServer) -> Any:
    """The test tasks module, once Django is set up with the leaseq backend."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            USE_TZ=True,
            INSTALLED_APPS=["leaseq.django"],
            DATABASES={},
            TASKS={
                "default": {
                    "BACKEND": "leaseq.django.LeaseqBackend",
                    "QUEUES": ["default", "emails"],
                    "OPTIONS": {"url": redis_server.url, "keep_succeeded": 600.0},
                },
                # QUEUES []: any queue name, as Django reads it.
                "anyqueue": {
                    "BACKEND": "leaseq.django.LeaseqBackend",
                    "QUEUES": [],
                    "OPTIONS": {"url": redis_server.url, "keep_succeeded": 600.0},
                },
            },
        )
        django.setup()
    from tests.support import django_tasks

    return django_tasks


@pytest.fixture
def tasks(django_tasks: Any, redis_server: RedisServer) -> Iterator[Any]:
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    django_tasks.ran.clear()
    yield django_tasks
    client.close()
