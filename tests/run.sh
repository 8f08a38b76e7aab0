#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine:
#   a virtualenv in .venv, the project with its test extra, redis-server
#   (from Debian's package when missing and we are root), then pytest.
# Extra arguments go to pytest, e.g.  bash tests/run.sh -k fencing
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
    # The Debian package starts a system service on 6379; the tests start
    # their own servers on free ports and never use it.
  else
    echo "redis-server is missing: run  sudo apt-get install -y redis-server  and try again" >&2
    exit 1
  fi
fi

exec .venv/bin/python -m pytest "$@"
