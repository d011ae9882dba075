#!/usr/bin/env bash
# Installs what the end-to-end test needs: Debian's chromium (browser for playwright-core), libkrb5-dev and
# ripgrep (code-server's native deps), and code-server 4.100.3 into e2e/.code-server. Idempotent: a finished
# install leaves a stamp file and later runs return at once.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="$HERE/.code-server"
VERSION="4.100.3"
STAMP="$PREFIX/.installed-$VERSION"

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/rg ] || missing+=(ripgrep)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f "$STAMP" ]; then
  echo "setup: code-server $VERSION already installed in $PREFIX"
  exit 0
fi

rm -rf "$PREFIX"
mkdir -p "$PREFIX"
cd "$PREFIX"
export npm_config_nodedir=/usr npm_config_yes=true
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

echo "setup: npm install code-server@$VERSION (scripts off: its postinstall downloads from the internet)"
echo '{"name":"e2e-code-server","private":true}' >package.json
npm install --ignore-scripts --no-save "code-server@$VERSION" >/dev/null
npm rebuild argon2 >/dev/null

CS="$PREFIX/node_modules/code-server"
VS="$CS/lib/vscode"

# What code-server's postinstall.sh does, minus downloads: install VS Code's own deps with ripgrep taken from
# Debian, rebuild the native modules against the system node, and recreate the links it expects.
install_vscode_deps() {
  local dir="$1"
  (
    cd "$dir"
    npm install --omit=dev --ignore-scripts >/dev/null
    if [ -d node_modules/@vscode/ripgrep ]; then
      mkdir -p node_modules/@vscode/ripgrep/bin
      ln -sf /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
    fi
    npm rebuild >/dev/null
  )
}
echo "setup: installing VS Code dependencies"
install_vscode_deps "$VS"
[ -e "$VS/node_modules.asar" ] || ln -s node_modules "$VS/node_modules.asar"
echo "setup: installing built-in extension dependencies"
install_vscode_deps "$VS/extensions"

# The remote-cli and browser helper links from postinstall.sh.
ln -sfn code-linux.sh "$VS/bin/remote-cli/code-server"
ln -sfn browser-linux.sh "$VS/bin/helpers/browser.sh"

node "$CS/out/node/entry.js" --config "$PREFIX/config.yaml" --version
touch "$STAMP"
echo "setup: code-server $VERSION ready in $PREFIX"
