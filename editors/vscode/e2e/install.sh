#!/bin/sh
# Installs what the end-to-end test needs, once: Debian's chromium and the build tools for
# code-server's native modules (apt, as root, only when missing), then code-server and
# playwright-core from npm into editors/vscode/e2e/node_modules.
set -eu
cd "$(dirname "$0")"
E2E=$(pwd)
CACHE=$E2E/.cache

# -- system packages ------------------------------------------------------------------------
missing=""
[ -x /usr/bin/chromium ] || missing="$missing chromium"
command -v rg >/dev/null 2>&1 || missing="$missing ripgrep"
[ -e /usr/include/gssapi/gssapi.h ] || missing="$missing libkrb5-dev"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
{ command -v make && command -v g++; } >/dev/null 2>&1 || missing="$missing build-essential"
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: the VS Code end-to-end test needs these Debian packages:$missing" >&2
    echo "       run as root: apt-get update && apt-get install -y$missing" >&2
    exit 1
  fi
  echo "installing:$missing"
  apt-get update -q
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
fi

# -- code-server and playwright-core ---------------------------------------------------------
STAMP=node_modules/.e2e-stamp
if [ -f "$STAMP" ] && [ "$STAMP" -nt package-lock.json ] && [ -x node_modules/.bin/code-server ]; then
  exit 0
fi

# code-server's VS Code depends on @vscode/ripgrep, whose install script downloads rg from
# GitHub; it takes a tarball from its cache folder under TMPDIR instead, so put Debian's rg there.
case "$(uname -m)" in
  x86_64) rg_target=x86_64-unknown-linux-musl ;;
  aarch64) rg_target=aarch64-unknown-linux-musl ;;
  *) echo "error: no ripgrep target known for $(uname -m)" >&2; exit 1 ;;
esac
rg_version=1.15.11  # @vscode/ripgrep in code-server 4.100.3's lib/vscode/npm-shrinkwrap.json
rg_cache=$CACHE/tmp/vscode-ripgrep-cache-$rg_version
mkdir -p "$rg_cache" "$CACHE/rg"
cp "$(command -v rg)" "$CACHE/rg/rg"
tar czf "$rg_cache/ripgrep-v13.0.0-10-$rg_target.tar.gz" -C "$CACHE/rg" rg

# Native modules are built with node-gyp against the local Node headers when there are any
# (node-gyp would otherwise download them); npx must be allowed to fetch node-gyp itself.
node_prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
if [ -e "$node_prefix/include/node/common.gypi" ]; then
  npm_config_nodedir=$node_prefix
  export npm_config_nodedir
fi
TMPDIR=$CACHE/tmp npm_config_unsafe_perm=true npm_config_yes=true \
  npm ci --no-audit --no-fund --foreground-scripts
touch "$STAMP"
