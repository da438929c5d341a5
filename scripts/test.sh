#!/usr/bin/env bash
# Set up (see scripts/setup.sh), then run the whole test suite against the real engine.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
