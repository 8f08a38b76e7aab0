"""The exceptions leaseq raises: one small hierarchy rooted at LeaseqError.

Input errors also subclass the matching built-in (``ValueError``,
``TypeError``, ``LookupError``, ``ConnectionError``), so code that already
catches those keeps working. Users never need to import ``redis`` or
``msgspec`` to catch a leaseq failure.
"""

from __future__ import annotations

__all__ = [
    "AlreadyFinished",
    "AuthError",
    "DamagedKey",
    "DamagedRow",
    "HandlerImportError",
    "InvalidArgument",
    "InvalidName",
    "InvalidPayload",
    "InvalidTaskArgument",
    "JobNotFound",
    "JobStateError",
    "LeaseCapReached",
    "LeaseLost",
    "LeaseqError",
    "LeaseqWarning",
    "NotReplicated",
    "PayloadTooLarge",
    "ScriptError",
    "ServerBusy",
    "ServerFull",
    "ServerUnavailable",
    "SignalTimeout",
    "TaskFailed",
    "WaitTimeout",
]


class LeaseqError(Exception):
    """Root of every error leaseq raises on purpose."""

    def __reduce__(self) -> tuple[object, ...]:
        # Most subclasses take their own arguments, not the message that ends up in
        # ``args``: the default reduce would call them with the message alone and
        # fail. Rebuilt from the message and the fields instead, an error crosses a
        # process boundary (multiprocessing, concurrent.futures) whole.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[LeaseqError], args: tuple[object, ...], fields: dict[str, object]
) -> LeaseqError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


class LeaseqWarning(UserWarning):
    """A server setting that puts jobs at risk (e.g. an evicting ``maxmemory-policy``)."""


class InvalidArgument(LeaseqError, ValueError):
    """A number, setting or option outside its documented range. Nothing was written."""


class InvalidName(InvalidArgument):
    """A queue name, prefix, job id or marker name that breaks the naming rules."""


class InvalidPayload(InvalidArgument):
    """A payload or result that cannot be encoded (or decoded into the queue's type)."""


class PayloadTooLarge(InvalidPayload):
    """An encoded payload or result over the queue's ``max_payload_bytes``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"encoded payload is {size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit


class HandlerImportError(InvalidArgument):
    """The handler's own module failed to import: a SyntaxError, an ImportError
    inside it, or any exception its top-level code raised. ``module``,
    ``error`` (the exception's type name), ``filename`` and ``lineno`` say what
    and where; the message is one line."""

    def __init__(
        self,
        module: str,
        error: str,
        detail: str,
        filename: str | None,
        lineno: int | None,
    ) -> None:
        where = f"{filename}:{lineno}" if filename else "an unknown place"
        super().__init__(f"handler module {module!r} failed to import: {detail} (at {where})")
        self.module = module
        self.error = error
        self.detail = detail
        self.filename = filename
        self.lineno = lineno


class LeaseLost(LeaseqError):
    """The lease is no longer held: the row is not ``active`` under this token.

    Raised by ``complete``, ``extend``, ``fail``, ``release``, ``once`` and
    ``progress``, and returned per lease by ``complete_many`` and
    ``extend_many``; nothing was changed. It names the lease: ``job_id``,
    ``token`` (its attempt), ``queue`` (the queue it was claimed from) and
    ``incarnation`` (the row it was claimed from, as ``Lease.incarnation``);
    ``state`` and ``attempts`` are what the row held (``None`` when the row is
    gone). A queue's calls always fill in ``queue`` and ``incarnation``: the
    queues of a set may hold one job id, and a job deleted and enqueued again
    starts over at attempt 1, so only all four tell every lease apart. They
    are ``None`` on a ``LeaseLost`` made without them.
    """

    def __init__(
        self,
        job_id: str,
        token: int,
        state: str | None,
        attempts: str | None,
        message: str = "",
        *,
        queue: str | None = None,
        incarnation: int | None = None,
    ) -> None:
        if not message:
            where = "the row is gone" if state is None else f"row is {state} at attempts={attempts}"
            message = f"lease on job {job_id!r} (attempt {token}) is lost: {where}"
        super().__init__(message)
        self.job_id = job_id
        self.token = token
        self.state = state
        self.attempts = attempts
        self.queue = queue
        self.incarnation = incarnation


class AlreadyFinished(LeaseLost):
    """The row already moved on under this very token.

    Typically a replayed call (the reply to the first one was lost) — the job
    was completed, failed or released with this lease. For ``fail`` and
    ``release`` it also covers a lease that expired and was reaped while still
    on this token: either way the job is out of this worker's hands.
    """


class LeaseCapReached(LeaseLost):
    """``extend`` cannot move the deadline: the claim used up the queue's ``lease_cap``.

    The row is still ``active`` under this token, but its deadline
    (``deadline``, epoch seconds) has passed and a reaper will hand the job
    back; a handler that keeps heartbeating cannot hold a job forever.
    """

    def __init__(
        self,
        job_id: str,
        token: int,
        deadline: float,
        *,
        queue: str | None = None,
        incarnation: int | None = None,
    ) -> None:
        super().__init__(
            job_id,
            token,
            "active",
            str(token),
            f"lease on job {job_id!r} (attempt {token}) reached the queue's lease_cap",
            queue=queue,
            incarnation=incarnation,
        )
        self.deadline = deadline


class JobNotFound(LeaseqError, LookupError):
    """No job with this id in the queue."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r}")
        self.job_id = job_id


class JobStateError(LeaseqError):
    """The job exists but is in a state where this operation does not apply."""

    def __init__(self, job_id: str, state: str, wanted: str, *, message: str = "") -> None:
        """``message`` replaces the usual "job 'x' is <state>; <wanted>" where the
        subject is not one job (a ``drop`` refused names the queue)."""
        super().__init__(message or f"job {job_id!r} is {state}; {wanted}")
        self.job_id = job_id
        self.state = state


class DamagedRow(LeaseqError):
    """A job row that does not hold what leaseq wrote (say, edited by hand)."""

    def __init__(self, job_id: str, field: str, value: object, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"job {job_id!r} has a damaged field {field}={value!r}{detail}")
        self.job_id = job_id
        self.field = field
        self.value = value


class DamagedKey(LeaseqError):
    """A queue key holds the wrong Redis type (say, overwritten by hand)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"a queue key holds the wrong type of value: {detail}")


class ScriptError(LeaseqError):
    """A script answered something leaseq does not know: a bug or a version mix."""


class NotReplicated(LeaseqError):
    """A ``durable=`` queue's change was applied on the primary, but fewer than
    ``wanted`` replicas acknowledged it within the timeout: a failover now could
    lose it. ``result`` is what the call returned (the id, the leases, ...)."""

    def __init__(self, op: str, wanted: int, acked: int, result: object) -> None:
        super().__init__(
            f"{op}: applied, but only {acked} of {wanted} replicas acknowledged it in time"
        )
        self.op = op
        self.wanted = wanted
        self.acked = acked
        self.result = result


class ServerUnavailable(LeaseqError, ConnectionError):
    """Redis could not be reached or timed out. The call may or may not have run:
    ``not_run`` is True when it provably did not (the connection failed before
    the command was sent, or the server answered with a refusal)."""

    not_run: bool = False


class ServerBusy(ServerUnavailable):
    """Redis is there but cannot serve this call right now: a replica during a
    failover (READONLY), a long script (BUSY), loading its data (LOADING), a
    cluster resharding or down (TRYAGAIN, CLUSTERDOWN, MASTERDOWN, ASK/MOVED),
    persistence or replication refusing writes (MISCONF, NOREPLICAS).

    Transient: workers retry with backoff. The server answered with a refusal:
    the call did not run (``not_run``).
    """

    not_run = True


class ServerFull(ServerUnavailable):
    """Redis refused a write because it is full (OOM: ``used_memory`` is over
    ``maxmemory`` and the policy is ``noeviction``). Nothing was written.

    Draining the queue (claims, completions, reaps) frees memory; raise
    ``maxmemory`` or purge jobs to make room for new ones.
    """


class AuthError(LeaseqError, PermissionError):
    """Redis refused the credentials (WRONGPASS, NOAUTH, a password for a
    server without one) or the user's ACL lacks a command or key leaseq
    needs (NOPERM). Not transient: retrying will not help, so workers stop."""


class TaskFailed(LeaseqError):
    """A typed task's job ended without a result: dead-lettered or cancelled.

    Raised by ``Task.wait``; ``state`` is the job's final state and
    ``last_error`` its last failure text (None for a cancelled job)."""

    def __init__(self, job_id: str, state: str, last_error: str | None) -> None:
        first = (last_error or "").strip().splitlines()
        why = f": {first[0]}" if first else ""
        super().__init__(f"job {job_id!r} ended {state}{why}")
        self.job_id = job_id
        self.state = state
        self.last_error = last_error


class WaitTimeout(LeaseqError, TimeoutError):
    """``Task.wait`` gave up: the job had not finished after ``timeout`` seconds.
    The job is untouched and may still finish."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"job {job_id!r} did not finish within {timeout:g}s")
        self.job_id = job_id
        self.timeout = timeout


class SignalTimeout(LeaseqError, TimeoutError):
    """``current_job().wait_for`` ended with no signal: its ``timeout`` passed (or an
    operator ran the job now). Raised on the run that resumes, and again on any
    later run: the wait is recorded as timed out (docs/durable.md)."""

    def __init__(self, name: str, key: str, timeout: float | None) -> None:
        within = "" if timeout is None else f" within {timeout:g}s"
        super().__init__(f"wait {name!r}: no signal {key!r}{within}")
        self.name = name
        self.key = key
        self.timeout = timeout


class InvalidTaskArgument(InvalidArgument, TypeError):
    """A typed task was called with arguments that do not fit its signature: a
    missing or unknown argument, or a value that does not convert to its
    annotation (or cannot be stored as JSON). Nothing was written."""

    def __init__(self, task: str, argument: str | None, why: str) -> None:
        where = f"argument {argument!r}: " if argument else ""
        super().__init__(f"task {task!r}: {where}{why}")
        self.task = task
        self.argument = argument
        self.why = why
