#!/usr/bin/env bash
# Rebuild static/vendor/codemirror/: CodeMirror 6 with Python support as ONE ES module
# (codemirror.js), each package's licence, and NOTICE.md naming the versions.
#
# Every package of the bundle is pinned below (the direct ones and everything they pull in), so
# npm resolves the same tree each time; esbuild, pinned too, only bundles. Needs node and npm
# (the npm registry), nothing else; the result is checked in, and the page loads nothing from
# elsewhere at run time. Run from anywhere: scripts/vendor_codemirror.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/static/vendor/codemirror"
ESBUILD_VERSION="0.28.2"

# name@version, the bundle's whole dependency tree (`npm ls --all` of a build).
PACKAGES=(
  "codemirror@6.0.2"
  "@codemirror/lang-python@6.2.1"
  "@codemirror/autocomplete@6.20.4"
  "@codemirror/commands@6.11.1"
  "@codemirror/language@6.13.1"
  "@codemirror/lint@6.9.8"
  "@codemirror/search@6.7.2"
  "@codemirror/state@6.7.6"
  "@codemirror/view@6.43.15"
  "@lezer/common@1.5.5"
  "@lezer/highlight@1.2.5"
  "@lezer/lr@1.4.12"
  "@lezer/python@1.1.19"
  "@marijn/find-cluster-break@1.0.4"
  "crelt@1.0.7"
  "style-mod@4.1.5"
  "w3c-keyname@2.2.8"
)

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm init -y >/dev/null
npm install --no-audit --no-fund --save-exact "${PACKAGES[@]}" "esbuild@$ESBUILD_VERSION" >/dev/null

# The names static/js/index.js imports; one module, so one copy of @codemirror/state.
cat >entry.js <<'EOF'
export { EditorView, basicSetup } from "codemirror";
export { python } from "@codemirror/lang-python";
export { Decoration, WidgetType, keymap } from "@codemirror/view";
export { EditorState, Prec, StateEffect, StateField } from "@codemirror/state";
export { indentUnit, syntaxHighlighting } from "@codemirror/language";
export { indentWithTab } from "@codemirror/commands";
export { classHighlighter } from "@lezer/highlight";
EOF

mkdir -p "$OUT"
rm -f "$OUT"/LICENSE-* "$OUT/codemirror.js"
./node_modules/.bin/esbuild entry.js --bundle --format=esm --minify --legal-comments=none \
  --target=es2020 --outfile="$OUT/codemirror.js" --log-level=warning

# Check that what npm resolved is what is pinned (a silently different tree is not reproducible).
for spec in "${PACKAGES[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  got="$(node -p "require('./node_modules/$name/package.json').version")"
  if [[ "$got" != "$want" ]]; then
    echo "vendor_codemirror: $name resolved to $got, pinned $want" >&2
    exit 1
  fi
  cp "node_modules/$name/LICENSE" "$OUT/LICENSE-${name//\//-}"
done

SHA="$(sha256sum "$OUT/codemirror.js" | cut -d' ' -f1)"
{
  echo "# Vendored: CodeMirror 6 (codemirror 6.0.2, @codemirror/lang-python 6.2.1)"
  echo
  echo "\`codemirror.js\` is one ES module bundling the npm packages below (esbuild $ESBUILD_VERSION,"
  echo "\`--bundle --format=esm --minify\`), built by \`scripts/vendor_codemirror.sh\`; it exports only"
  echo "the names \`static/js/index.js\` uses (the home page's scenario editor)."
  echo "sha256 \`$SHA\`."
  echo
  echo "| package | version | licence |"
  echo "|---|---|---|"
  for spec in "${PACKAGES[@]}"; do
    name="${spec%@*}"
    license="$(node -p "require('./node_modules/$name/package.json').license")"
    echo "| \`$name\` | ${spec##*@} | $license, \`LICENSE-${name//\//-}\` |"
  done
  echo
  echo "All are by Marijn Haverbeke and others (https://codemirror.net), MIT. To update: change the"
  echo "pinned versions in \`scripts/vendor_codemirror.sh\` (the whole tree: \`npm ls --all\` of a"
  echo "fresh install of \`codemirror\` and \`@codemirror/lang-python\`), then run it; it rewrites this"
  echo "folder, this file included. Needs node and npm, nothing at run time."
} >"$OUT/NOTICE.md"

echo "vendor_codemirror: $(wc -c <"$OUT/codemirror.js") bytes in $OUT/codemirror.js"
