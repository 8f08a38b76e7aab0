"""Every redis-py exception becomes a leaseq one, in ``_redis.translate_errors``.

Unit cases raise each redis-py exception (as its parser builds it from a
server's error reply) through ``translate_errors``; real-server cases make
the server itself refuse: a wrong password, no password, a missing ACL
permission, a full server (``--maxmemory``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import redis.exceptions as rex
from redis._parsers.base import BaseParser

import leaseq
from leaseq.errors import (
    AuthError,
    DamagedKey,
    InvalidArgument,
    ScriptError,
    ServerBusy,
    ServerFull,
    ServerUnavailable,
)
from leaseq.transport import client as _redis
from tests.support.servers import RedisServer

PASSWORD = "Sekr1t-pa55"


def _from_server(reply: str) -> Exception:
    """The exception redis-py raises for this error reply (its own parser's mapping)."""
    exc = BaseParser.parse_error(reply)
    assert isinstance(exc, Exception)
    return exc


def _translated(exc: BaseException) -> BaseException:
    with pytest.raises(leaseq.LeaseqError) as info, _redis.translate_errors("claim"):
        raise exc
    assert info.value.__cause__ is None and info.value.__suppress_context__
    return info.value


REPLIES = [
    ("WRONGPASS invalid username-password pair or user is disabled.", AuthError, "WRONGPASS"),
    ("NOAUTH Authentication required.", AuthError, "needs a password"),
    (
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time",
        AuthError,
        "needs a password",
    ),
    ("ERR Protocol error: unauthenticated multibulk length", AuthError, "needs a password"),
    ("NOPERM User leaseq has no permissions to run the 'evalsha' command", AuthError, "NOPERM"),
    ("NOPERM No permissions to access a key", AuthError, "NOPERM"),
    (
        "ERR The user executing the script can't run this command or subcommand script: "
        "558784fe6903935f7c2fa1a4e915aa5197f3239f, on @user_script:215.",
        AuthError,
        "NOPERM",
    ),
    (  # Valkey 8's words for the same refusal
        "ACL failure in script: User nohset has no permissions to run the 'hset' command "
        "script: 68e389fc636697d236df367f970373a8fbefb4c5, on @user_script:216.",
        AuthError,
        "NOPERM",
    ),
    (
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?",
        AuthError,
        "has none set",
    ),
    ("OOM command not allowed when used memory > 'maxmemory'.", ServerFull, "maxmemory"),
    (
        "ERR Error running script (call to f_1): @user_script:9: @user_script: 9: "
        "OOM command not allowed when used memory > 'maxmemory'.",
        ServerFull,
        "full",
    ),
    ("READONLY You can't write against a read only replica.", ServerBusy, "READONLY"),
    (
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        ServerBusy,
        "BUSY",
    ),
    ("LOADING Redis is loading the dataset in memory", ServerBusy, "LOADING"),
    ("TRYAGAIN Multiple keys request during rehashing of slot", ServerBusy, "TRYAGAIN"),
    ("CLUSTERDOWN The cluster is down", ServerBusy, "CLUSTERDOWN"),
    (
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ServerBusy,
        "MASTERDOWN",
    ),
    (
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
        ServerBusy,
        "MISCONF",
    ),
    ("NOREPLICAS Not enough good replicas to write.", ServerBusy, "NOREPLICAS"),
    (
        "UNBLOCKED force unblock from blocking operation, instance state changed",
        ServerBusy,
        "UNBLOCKED",
    ),
    ("MOVED 3999 127.0.0.1:6381", ServerBusy, "MOVED"),
    ("ASK 3999 127.0.0.1:6381", ServerBusy, "ASK"),
    ("WRONGTYPE Operation against a key holding the wrong kind of value", DamagedKey, "claim.lua"),
    ("ERR hash value is not an integer", DamagedKey, "by hand"),
    ("ERR max number of clients reached", ServerUnavailable, "unavailable"),
    ("ERR unknown command 'FCALL'", ScriptError, "claim.lua"),
    ("CROSSSLOT Keys in request don't hash to the same slot", ScriptError, "CROSSSLOT"),
    ("EXECABORT Transaction discarded because of previous errors.", ScriptError, "discarded"),
]


@pytest.mark.parametrize(("reply", "kind", "needle"), REPLIES, ids=[r[0][:24] for r in REPLIES])
def test_every_server_error_reply_maps_to_its_leaseq_error(
    reply: str, kind: type[Exception], needle: str
) -> None:
    err = _translated(_from_server(reply))
    assert type(err) is kind, (reply, err)
    assert needle in str(err)
    if kind is AuthError:
        assert isinstance(err, PermissionError) and not isinstance(err, ServerUnavailable)


def _client_side() -> list[tuple[BaseException, type[Exception]]]:
    cases: list[tuple[BaseException, type[Exception]]] = [
        (
            rex.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."),
            ServerUnavailable,
        ),
        (rex.TimeoutError("Timeout reading from socket"), ServerUnavailable),
        (rex.AuthenticationError("invalid password"), AuthError),
        (rex.AuthorizationError("user is not authorized"), AuthError),
        (rex.BusyLoadingError("Redis is loading the dataset in memory"), ServerBusy),
        (rex.InvalidResponse("Protocol Error: H, b'TTP/1.1'"), ServerUnavailable),
        (rex.DataError("Invalid input of type: 'dict'."), InvalidArgument),
        (rex.ClusterError("TTL exhausted."), ServerBusy),
        (rex.SlotNotCoveredError("Command # 1 (EVALSHA) failed: no node for slot 42"), ServerBusy),
        (rex.RedisClusterException("Redis Cluster cannot be connected."), ServerUnavailable),
        (rex.PubSubError("odd"), ScriptError),
        (rex.WatchError("watched key changed"), ScriptError),
        (rex.RedisError("something new"), ScriptError),
    ]
    for name, kind in (("MaxConnectionsError", ServerUnavailable),
                       ("ExternalAuthProviderError", AuthError)):  # fmt: skip
        cls = getattr(rex, name, None)  # newer redis-py only
        if cls is not None:
            cases.append((cls("x"), kind))
    return cases


@pytest.mark.parametrize(("exc", "kind"), _client_side(), ids=lambda v: type(v).__name__)
def test_every_redis_py_exception_class_maps(exc: BaseException, kind: type[Exception]) -> None:
    assert type(_translated(exc)) is kind


def test_the_whole_redis_py_hierarchy_is_translated() -> None:
    """No exception class redis-py defines gets past translate_errors untranslated."""
    classes = [
        c
        for c in vars(rex).values()
        if isinstance(c, type) and issubclass(c, (rex.RedisError, rex.RedisClusterException))
    ]
    assert len(classes) > 20
    for cls in classes:
        try:
            exc = cls("x")
        except (TypeError, ValueError):
            exc = cls.__new__(cls)
            Exception.__init__(exc, "x")
        assert isinstance(_redis.translate(exc, "claim"), leaseq.LeaseqError), cls


def test_other_exceptions_pass_through_unchanged() -> None:
    with pytest.raises(KeyError), _redis.translate_errors():
        raise KeyError("mine")
    with pytest.raises(leaseq.JobNotFound), _redis.translate_errors():
        raise leaseq.JobNotFound("x")


def test_busy_and_full_are_server_unavailable_auth_is_not() -> None:
    assert issubclass(ServerBusy, ServerUnavailable) and issubclass(ServerFull, ServerUnavailable)
    assert issubclass(AuthError, PermissionError) and not issubclass(AuthError, ConnectionError)
    for name in ("AuthError", "ServerBusy", "ServerFull"):
        assert name in leaseq.__all__ and getattr(leaseq, name) is getattr(leaseq.errors, name)


@pytest.mark.parametrize(
    ("exc", "not_run"),
    [
        (rex.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."), True),
        (rex.TimeoutError("Timeout connecting to server"), True),
        (rex.ConnectionError("Error 32 while writing to socket. Broken pipe."), True),
        (rex.ConnectionError("Connection closed by server."), False),
        (rex.TimeoutError("Timeout reading from socket"), False),
        (rex.ReadOnlyError("READONLY You can't write against a read only replica."), True),
        (rex.BusyLoadingError("LOADING Redis is loading the dataset in memory"), True),
    ],
)
def test_an_outage_says_whether_the_call_provably_did_not_run(
    exc: BaseException, not_run: bool
) -> None:
    # What an enqueue may be sent again on (enqueue_retry): a lost reply is not.
    error = _redis.translate(exc, "enqueue")
    assert isinstance(error, ServerUnavailable) and error.not_run is not_run


def test_auth_error_text_never_holds_the_password() -> None:
    err = _translated(rex.AuthenticationError(f"redis://u:{PASSWORD}@h/0 refused"))
    assert PASSWORD not in str(err)


# -- the real server refuses ---------------------------------------------------------


@pytest.fixture(scope="module")
def locked() -> Iterator[RedisServer]:
    server = RedisServer()  # the password is set once it is up (start() pings without one)
    admin = redis.Redis(port=server.port)
    admin.execute_command(
        "ACL", "SETUSER", "other", "on", ">otherpass", "~other:*", "+@all"
    )  # a user whose keys are not leaseq's
    admin.execute_command(
        "ACL", "SETUSER", "nohset", "on", ">nohsetpass", "~*", "+@all", "-hset"
    )  # a user without a command the scripts run
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("user_info", "needle"),
    [
        (f":wrong-{PASSWORD}@", "WRONGPASS"),
        ("", "needs a password"),
        ("other:otherpass@", "NOPERM"),  # a user without leaseq's keys
        ("nohset:nohsetpass@", "NOPERM"),  # refused inside a script
    ],
    ids=["wrong password", "no password", "acl without the keys", "acl without a command"],
)
def test_real_refusals_are_auth_errors(locked: RedisServer, user_info: str, needle: str) -> None:
    q = leaseq.Queue.from_url(f"redis://{user_info}127.0.0.1:{locked.port}/0", "q")
    with pytest.raises(AuthError, match=needle) as info:
        q.enqueue(1)
    assert PASSWORD not in str(info.value)


def test_real_full_server_refuses_enqueue_with_server_full() -> None:
    server = RedisServer("--maxmemory-policy", "noeviction")
    try:
        admin = redis.Redis(port=server.port)
        q = leaseq.Queue("q", redis=redis.Redis(port=server.port))
        q.enqueue({"before": "full"})
        admin.config_set("maxmemory", "1mb")  # below what the server already uses
        with pytest.raises(ServerFull, match="maxmemory") as info:
            q.enqueue({"after": "full"})
        assert isinstance(info.value, ServerUnavailable)
        admin.config_set("maxmemory", "0")
        assert q.stats().pending == 1  # nothing was written
        admin.close()
    finally:
        server.stop()


def test_every_error_survives_a_trip_between_processes() -> None:
    """multiprocessing and concurrent.futures hand a worker's exception back by
    pickling it (the error, never a payload): each one comes back whole."""
    import pickle

    from leaseq import errors

    samples: dict[type[BaseException], BaseException] = {
        errors.PayloadTooLarge: errors.PayloadTooLarge(2048, 1024),
        errors.HandlerImportError: errors.HandlerImportError(
            "tasks", "SyntaxError", "invalid syntax", "tasks.py", 3
        ),
        errors.LeaseLost: errors.LeaseLost("j1", 2, "pending", "2", queue="q", incarnation=7),
        errors.AlreadyFinished: errors.AlreadyFinished("j1", 2, "succeeded", "2"),
        errors.LeaseCapReached: errors.LeaseCapReached("j1", 2, 1700000000.5, queue="q"),
        errors.JobNotFound: errors.JobNotFound("j1"),
        errors.JobStateError: errors.JobStateError("j1", "active", "dead"),
        errors.DamagedRow: errors.DamagedRow("j1", "attempts", "x", "not a number"),
        errors.DamagedKey: errors.DamagedKey("pending is a string"),
        errors.NotReplicated: errors.NotReplicated("complete", 2, 1, None),
        errors.TaskFailed: errors.TaskFailed("j1", "dead", "ValueError: no"),
        errors.WaitTimeout: errors.WaitTimeout("j1", 2.5),
        errors.SignalTimeout: errors.SignalTimeout("approval", "approved:7", 60.0),
        errors.InvalidTaskArgument: errors.InvalidTaskArgument("send", "to", "not a str"),
    }
    classes = [
        getattr(errors, name)
        for name in errors.__all__
        if issubclass(getattr(errors, name), errors.LeaseqError)
    ]
    for cls in classes:
        error = samples.get(cls) or cls(f"{cls.__name__} happened")
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls and str(back) == str(error), cls
        assert vars(back) == vars(error), cls
