#!/bin/sh
# Installs what `make test` needs beyond Go: Debian's chromium, which the
# dashboard's browser test drives headless (cmd/wharf/e2e_dashboard_test.go).
# Idempotent: does nothing when /usr/bin/chromium is there.
set -eu

CHROMIUM=${WHARF_CHROMIUM:-/usr/bin/chromium}

if [ -x "$CHROMIUM" ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "test-setup: $CHROMIUM is missing and this is not root: install Debian's chromium (apt-get install chromium) and run make test again" >&2
	exit 1
fi
echo "test-setup: installing chromium for the dashboard's browser test" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
	echo "test-setup: apt-get installed chromium but $CHROMIUM is still missing" >&2
	exit 1
fi
