#!/usr/bin/env bash
# `make demo`: the pi-lsp CLI on the example workspace (copied, so the example stays untouched).
set -euo pipefail
PI_LSP=${1:-pi-lsp}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/workspace" "$work/shop-api"
session=$(ls "$work"/shop-api/.pi/sessions/*.jsonl)
dead_end=2879d399   # tip of branch A, where the ORM rewrite died
question=e1afef94   # the user question both branches answer

step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }
step "Sessions of the workspace" "$PI_LSP" sessions "$work/shop-api"
step "The tree: two branches from one question, a compaction on B, labels" \
    "$PI_LSP" tree "$session"
step "What the model sees at the tip of branch B (after the compaction)" \
    "$PI_LSP" context "$session"
step "What it saw at the tip of dead-end branch A" "$PI_LSP" context "$session" --leaf "$dead_end"
step "The same at B's tip in the model layer, as JSON (first 300 bytes)" \
    bash -c "'$PI_LSP' context '$session' --layer llm --json | head -c 300; echo"
step "Integrity check" "$PI_LSP" check "$session"
fork=$("$PI_LSP" fork "$session" --leaf "$question")
step "Fork at the question into a new session" "$PI_LSP" tree "$fork"
