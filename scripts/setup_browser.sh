#!/usr/bin/env bash
# Chromium for the test that opens `arc-trl view`'s report in a real browser (tests/integration/test_view_browser.py,
# driven by playwright from the dev extra, which never downloads a browser of its own): Debian's `chromium` package,
# installed when it is missing and apt-get can run (as root). Never fatal: without it that test is skipped, saying why.
set -uo pipefail
if [ -n "${ARC_TRL_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[setup] installing Debian's chromium for the browser test (one-time)"
  if ! { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; then
    echo "[setup] chromium could not be installed: tests/integration/test_view_browser.py will be skipped"
  fi
else
  echo "[setup] no chromium and no root apt-get: tests/integration/test_view_browser.py will be skipped" \
       "(install Debian's chromium, or set ARC_TRL_CHROMIUM)"
fi
exit 0
