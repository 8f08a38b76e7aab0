"""The tasks module the reference backends' tests import (``from tests import
tasks``), which their sdists do not ship: run.py lays this file into the
unpacked tree as ``tests/tasks.py``. Each task is what their tests expect of
it (names, messages, return values); written here, not copied."""

import time

try:  # Django 6: the built-in framework, as their tests pick it
    from django.tasks import TaskContext, task
except ImportError:  # the django-tasks backport
    from django_tasks import TaskContext, task


@task()
def noop_task(*args, **kwargs):
    return None


@task()
async def noop_task_async(*args, **kwargs):
    return None


@task()
def calculate_meaning_of_life():
    return 42


@task()
def failing_task_value_error():
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit():
    raise SystemExit("This task failed due to SystemExit")


@task()
def failing_task_keyboard_interrupt():
    raise KeyboardInterrupt("This task failed due to KeyboardInterrupt")


@task()
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value():
    return lambda: True  # neither JSON nor anything else a result can hold


@task()
def exit_task():
    exit(1)


@task()
def hang():
    time.sleep(300)


@task()
def sleep_for(seconds):
    time.sleep(seconds)


@task(takes_context=True)
def get_task_id(context):
    return context.task_result.id


@task(takes_context=True)
def test_context(context, attempt):
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt
