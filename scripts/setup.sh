#!/usr/bin/env bash
# Set up what the project needs on a fresh Debian machine (run as root): the project's venv in
# .venv; with --oracle, the reference PyTorch (torch 2.8.0) that differential tests compare
# against; with --browser, Debian's Chromium for the browser tests (Playwright drives it; its own
# browser download never works here). Safe to re-run: each step is skipped when already done.
#
# The oracle lives in a venv of its own under ~/.cache/autograd-lens (3-4 GB, a CUDA build that
# runs on the CPU), shared by every clone and every CI run on this machine; .venv sees it
# through a .pth file. --oracle also makes a second cached venv there with torch 2.13.0 and
# numpy, for the torch backend's tests (tests/trace/test_torch_backend_213.py): two torch versions
# cannot share a process, so .venv does not see it; its interpreter's path goes into
# .venv/autograd_lens_torch213 (one line), which tests/conftest.py reads. Delete a venv under
# the cache to force a fresh install of it.
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
TORCH213_VERSION=2.13.0
TORCH213_VENV="$CACHE/torch-$TORCH213_VERSION-py$PYVER"

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

# 3. The torch oracle (only for tests), and torch 2.13.0 for the torch backend's tests.
# ensure_torch_venv DIR VERSION SIZE [PACKAGE...]: a venv at DIR with torch==VERSION and the
# packages; (re)made only when it cannot import them all at that torch version, so a re-run costs
# one import of torch.
ensure_torch_venv() {
  local dir=$1 version=$2 size=$3
  shift 3
  local imports="torch"
  for pkg in "$@"; do imports+=", $pkg"; done
  if ! "$dir/bin/python" -c "import $imports, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" >/dev/null 2>&1; then
    echo "setup: installing torch $version into $dir ($size, once per machine)"
    rm -rf "$dir"
    mkdir -p "$CACHE"
    "$PY" -m venv "$dir"
    "$dir/bin/pip" install -q "torch==$version" "$@"
  fi
}

if [ "$WANT_ORACLE" = 1 ]; then
  ensure_torch_venv "$ORACLE_VENV" "$ORACLE_VERSION" "about 3.5 GB"
  SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ORACLE_SITE=$("$ORACLE_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$ORACLE_SITE" > "$SITE/autograd_lens_oracle.pth"
  .venv/bin/python -c "import torch; assert torch.__version__.startswith('$ORACLE_VERSION'), torch.__version__"

  # The torch backend imports only engine (NumPy) and torch, so numpy is all it needs besides.
  ensure_torch_venv "$TORCH213_VENV" "$TORCH213_VERSION" "about 1 GB for the CPU build" numpy
  # Absolute, since the cache folder may be given relative to this clone.
  echo "$(cd "$TORCH213_VENV" && pwd)/bin/python" > .venv/autograd_lens_torch213
fi
