#!/usr/bin/env bash
# Build the kubectl plugin's archive for this machine's OS and architecture: one
# self-contained `kubectl-tickwork` executable (PyInstaller: the interpreter and
# the CLI's dependencies inside, so users need no Python) plus the LICENSE, as
# kubectl-tickwork_v<version>_<os>_<arch>.tar.gz. The release workflow runs it on
# each platform's runner and .krew.yaml names the archives; the suite runs it here.
#
#   scripts/build-kubectl-plugin.sh OUTDIR          # prints the archive's path
#
# Needs Python >= 3.11 with venv; PyInstaller comes from PyPI.
set -euo pipefail

out="$(mkdir -p "$1" && cd "$1" && pwd)"
here="$(cd "$(dirname "$0")/.." && pwd)"
version="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$here/pyproject.toml")"
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "unsupported architecture: $(uname -m)" >&2; exit 1 ;;
esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "pyinstaller==6.22.3" "$here"
"$work/venv/bin/pyinstaller" --onefile --name kubectl-tickwork --log-level WARN \
  --distpath "$work/dist" --workpath "$work/build" --specpath "$work" \
  --copy-metadata tickwork "$here/tickwork/cli/__main__.py"
cp "$here/LICENSE" "$work/dist/LICENSE"
archive="$out/kubectl-tickwork_v${version}_${os}_${arch}.tar.gz"
tar -C "$work/dist" -czf "$archive" kubectl-tickwork LICENSE
echo "$archive"
