#!/usr/bin/env bash
# Makes promtool available to the tests of deploy/ (deploy/monitoring_test.go runs
# `promtool check rules` and `promtool test rules` on deploy/prometheus/). promtool comes from
# Debian's prometheus package, which is unpacked, not installed: installing it would start a
# Prometheus server on port 9090. The package is fetched with `apt-get download` and unpacked
# with `dpkg-deb -x` into QUEUEBOX_PROMTOOL_DIR (default /var/tmp/queuebox-promtool); a later
# run reuses that copy. The test looks for $QUEUEBOX_PROMTOOL_DIR/usr/bin/promtool.
#
# Prints the path of promtool on success; exits non-zero with the reason otherwise.
set -euo pipefail

dir="${QUEUEBOX_PROMTOOL_DIR:-/var/tmp/queuebox-promtool}"
bin="$dir/usr/bin/promtool"

if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "ensure-promtool: promtool is at $bin"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-promtool: $tool is missing; this script needs a Debian-like system (or put promtool at $bin)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$work/apt.log"

echo "ensure-promtool: downloading Debian's prometheus package (not installing it)"
if ! (cd "$work" && apt-get download prometheus >"$log" 2>&1); then
  # A fresh machine may have no package lists yet.
  if ! { apt-get update -q >>"$log" 2>&1 && (cd "$work" && apt-get download prometheus >>"$log" 2>&1); }; then
    cat "$log" >&2
    echo "ensure-promtool: apt-get download prometheus failed (output above)" >&2
    exit 1
  fi
fi

deb=$(ls "$work"/prometheus_*.deb)
# Unpack beside the final place and move it there, so that a concurrent run never sees half.
stage="$dir.tmp.$$"
rm -rf "$stage"
mkdir -p "$(dirname "$dir")"
dpkg-deb -x "$deb" "$stage"
if [ ! -x "$stage/usr/bin/promtool" ]; then
  rm -rf "$stage"
  echo "ensure-promtool: $deb holds no usr/bin/promtool" >&2
  exit 1
fi
rm -rf "$dir"
mv "$stage" "$dir"
"$bin" --version >/dev/null
echo "ensure-promtool: promtool is at $bin"
