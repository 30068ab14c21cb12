#!/usr/bin/env bash
# Set up what the project needs on a fresh Debian machine (run as root): the project's venv in
# .venv; with --oracle, the reference PyTorch (torch 2.8.0) that differential tests compare
# against; with --browser, Debian's Chromium for the browser tests (Playwright drives it; its own
# browser download never works here). Safe to re-run: each step is skipped when already done.
#
# The oracle lives in a venv of its own under ~/.cache/autograd-lens (3-4 GB, a CUDA build that
# runs on the CPU), shared by every clone and every CI run on this machine; .venv sees it
# through a .pth file. Delete that folder to force a fresh install.
set -euo pipefail
cd "$(dirname "$0")/.."

WANT_ORACLE=0
WANT_BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --oracle) WANT_ORACLE=1 ;;
    --browser) WANT_BROWSER=1 ;;
    *) echo "setup.sh: unknown option $arg (known: --oracle, --browser)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
ORACLE_VERSION=2.8.0
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
CACHE=${AUTOGRAD_LENS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/autograd-lens}
ORACLE_VENV="$CACHE/torch-$ORACLE_VERSION-py$PYVER"

# 1. System packages (Debian): python3-venv if the interpreter cannot make venvs, Graphviz's
#    `dot` to render graphs as SVG, Chromium for the browser tests.
APT=()
"$PY" -c 'import ensurepip, venv' >/dev/null 2>&1 || APT+=(python3-venv)
command -v dot >/dev/null 2>&1 || APT+=(graphviz)
if [ "$WANT_BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then APT+=(chromium); fi
if [ ${#APT[@]} -gt 0 ]; then
  echo "setup: installing ${APT[*]} (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${APT[@]}" >/dev/null
fi

# 2. The project venv, reinstalled when pyproject.toml changes.
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
STAMP=".venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  echo "setup: installing the project and its dev tools into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$STAMP"
fi

# 3. The torch oracle (only for tests).
if [ "$WANT_ORACLE" = 1 ]; then
  if ! "$ORACLE_VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$ORACLE_VERSION')" >/dev/null 2>&1; then
    echo "setup: installing the torch $ORACLE_VERSION oracle into $ORACLE_VENV (about 3.5 GB, once per machine)"
    rm -rf "$ORACLE_VENV"
    mkdir -p "$CACHE"
    "$PY" -m venv "$ORACLE_VENV"
    "$ORACLE_VENV/bin/pip" install -q "torch==$ORACLE_VERSION"
  fi
  SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ORACLE_SITE=$("$ORACLE_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$ORACLE_SITE" > "$SITE/autograd_lens_oracle.pth"
  .venv/bin/python -c "import torch; assert torch.__version__.startswith('$ORACLE_VERSION'), torch.__version__"
fi
