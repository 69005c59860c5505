#!/usr/bin/env bash
# Builds the documentation site, then (with --check) loads it in a real browser.
#
#   Tools/docs-site/build.sh            # builds .build-site/site
#   Tools/docs-site/build.sh --check    # builds it, serves it on loopback, checks it in Chromium
#
# The site: the DocC archive of every library module, transformed for static hosting, the
# course (docs/course), the examples gallery and the other pages of docs/, under one landing
# page. DocC runs with --analyze and --warnings-as-errors, so a warning fails the build.
# SITE_BASE sets the path the site is served under (for example /Orderly on GitHub Pages);
# SITE_OUTPUT the folder it is written to.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="/opt/swift/usr/bin:$PATH"
fi

out=${SITE_OUTPUT:-.build-site/site}
base=${SITE_BASE:-}
base=${base#/}
base=${base%/}
modules=(OrderlyCore OrderlyTestSupport OrderlyRepository OrderlySQLite OrderlyOutboxCore OrderlyOutbox OrderlyServer OrderlyPostgres OrderlyLaunch OrderlyTaskStore)

rm -rf "$out"
mkdir -p "$out"

# The symbol graphs come from the build .ci/run makes first: every trait on (so that
# OrderlyServer and OrderlyPostgres are documented as their users build them), warnings as
# errors, in .build-werror. The same folder, traits and flags, so DocC compiles nothing again
# after that build (and a developer's `.build` is left as it is).
build=(--scratch-path .build-werror --traits SQLite,Server,Postgres -Xswiftc -warnings-as-errors)

for module in "${modules[@]}"; do
  echo "==> DocC: $module"
  swift package "${build[@]}" --disable-sandbox --allow-writing-to-directory "$out" \
    generate-documentation --target "$module" \
    --analyze --warnings-as-errors \
    --transform-for-static-hosting \
    --hosting-base-path "${base:+$base/}$module" \
    --output-path "$out/$module"
done

echo "==> pages: docs/ and the examples' READMEs"
# Example packages keep their dependencies' checkouts in .build: not our pages.
pages=$(find docs Examples -name .build -prune -o -name '*.md' -print | sort)
# shellcheck disable=SC2086
python3 Tools/docs-site/render.py . "$out" $pages

echo "==> landing page"
python3 Tools/docs-site/landing.py "$out" "${modules[@]}"

echo "site written to $out"

if [ "${1:-}" = "--check" ]; then
  python3 Tools/docs-site/check.py "$out" "${modules[@]}"
fi
