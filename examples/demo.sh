#!/usr/bin/env bash
# `make demo`: the pi-lsp server driven by a small scripted editor, on a copy of the example.
set -euo pipefail
PYTHON=${1:-python3}
here=$(cd "$(dirname "$0")" && pwd)
exec "$PYTHON" "$here/demo.py"
