"""The settings module of ``manage.py leaseq_worker`` run as real processes
(test_processes.py): the backend of conftest.py's ``default``, on ``$LEASEQ_URL``,
with leaseq's log lines on stderr."""

SECRET_KEY = "leaseq-worker-tests"
USE_TZ = True
INSTALLED_APPS = ["leaseq.django"]
DATABASES: dict[str, object] = {}
TASKS = {
    "default": {
        "BACKEND": "leaseq.django.LeaseqBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"keep_succeeded": 600.0, "backoff": 0.0},
    }
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"leaseq": {"handlers": ["stderr"], "level": "INFO"}},
}
