"""Django settings for the reference backends' suites on leaseq (run.py's ``rq``
and ``db``): the apps their test modules import (``django_rq``, whose
``RQ_QUEUES`` their setUp reads; ``django_tasks_db``, whose models they
import), an in-memory SQLite database, and our backend as the default one.
Their TASKS overrides are mapped to our backend by ``leaseq_upstream.py``; the
server is ``$LEASEQ_URL``."""

from importlib.util import find_spec

SECRET_KEY = "leaseq-upstream-tests"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3"}}
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "leaseq.django",
    *[app for app in ("django_tasks", "django_rq", "django_tasks_db") if find_spec(app)],
]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
TASKS = {"default": {"BACKEND": "leaseq.django.LeaseqBackend", "QUEUES": ["default", "queue-1"]}}
# django_rq's connections: their setUp replaces them with fakeredis; nothing of
# ours uses them.
RQ_QUEUES = {name: {"HOST": "localhost", "PORT": 6379, "DB": 0} for name in ("default", "queue-1")}
