"""The ``leaseq`` command line: a thin client of ``leaseq.Queue`` (click + rich).

Errors print one line on stderr and exit non-zero, never a traceback, and
no output ever shows a password from a URL (``_redis.redact``).
"""

from __future__ import annotations

import os
import sys
import uuid
import warnings
from typing import NoReturn

import click

from leaseq.cli import events as cli_events
from leaseq.cli import jobs as _jobs
from leaseq.cli import schedules as cli_schedules
from leaseq.cli.context import DEFAULT_URL, Ctx, out, pass_ctx
from leaseq.cli.doctor import doctor as _doctor
from leaseq.cli.ops import register as _register_ops
from leaseq.cli.show import show
from leaseq.cli.stats import stats
from leaseq.cli.terminal import show_warning as _show_warning
from leaseq.cli.worker import worker
from leaseq.errors import LeaseqError
from leaseq.transport import client as _redis

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help=f"Redis URL (else $LEASEQ_URL, else {DEFAULT_URL}); memory:// is an in-process "
    "store; redis+sentinel://HOST,HOST/SERVICE/DB finds the primary through Sentinel.",
)
@click.option("--prefix", default="leaseq", show_default=True, help="Key prefix of the queues.")
@click.option(
    "--tasks",
    "task_modules",
    multiple=True,
    metavar="MODULE",
    envvar="LEASEQ_TASKS",
    help="A module of typed tasks (repeatable; else $LEASEQ_TASKS): edits of their jobs "
    "(retry --payload, the dashboard's Edit and retry) are checked against their signatures.",
)
@click.version_option(package_name="leaseq")
@click.pass_context
def cli(ctx: click.Context, url: str | None, prefix: str, task_modules: tuple[str, ...]) -> None:
    """leaseq: a job store on Redis built on leases and attempts."""
    ctx.obj = Ctx(url, prefix, task_modules)


cli_schedules.register(cli)  # schedule, schedules, unschedule, limits
cli_events.register(cli)  # events
cli.add_command(worker)  # leaseq/cli/worker.py
cli.add_command(stats)  # leaseq/cli/stats.py
cli.add_command(show)  # leaseq/cli/show.py
for _job_command in (_jobs.enqueue, _jobs.wait_, _jobs.ls_, _jobs.retry, _jobs.reap, _jobs.purge):
    cli.add_command(_job_command)  # leaseq/cli/jobs.py


@cli.command()
@click.option("--jobs", type=click.IntRange(2, 1000), default=12, show_default=True)
@pass_ctx
def demo(c: Ctx, jobs: int) -> None:
    """Enqueue jobs, run workers, crash one mid-job, watch the job come back."""
    from leaseq.cli.demo import run_demo

    # --url or $LEASEQ_URL, else a fresh embedded store per run (so a second
    # demo in one process starts clean).
    run_demo(c.explicit_url or f"memory://demo-{uuid.uuid4().hex[:8]}", jobs, c.prefix, out)


_register_ops(cli)  # pause, resume, cancel, update, delete, drop, web: leaseq/cli/ops.py
cli.add_command(_doctor)  # leaseq/cli/doctor.py


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"leaseq: error: {_redis.redact(message)}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning every expected error into one line."""
    warnings.showwarning = _show_warning
    try:
        cli.main(args=argv, prog_name="leaseq", standalone_mode=False)
    except click.exceptions.Abort:
        _fail("aborted")
    except click.exceptions.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (LeaseqError, ValueError, LookupError, ModuleNotFoundError) as exc:
        _fail(str(exc))  # ModuleNotFoundError: an extra not installed, named in the message
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("LEASEQ_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (LEASEQ_DEBUG=1 shows the traceback)")
