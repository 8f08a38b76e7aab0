"""Django settings for Django's own ``tests/tasks`` on leaseq (run.py's ``django``
suite): what Django's test settings give those tests (an in-memory SQLite
database, USE_TZ), with ``leaseq.django`` installed and our backend as the
default one. The tests' own TASKS overrides are mapped to our backend by
``leaseq_upstream.py``; the server is ``$LEASEQ_URL``."""

SECRET_KEY = "leaseq-upstream-tests"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3"}}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "leaseq.django"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
TASKS = {"default": {"BACKEND": "leaseq.django.LeaseqBackend"}}
