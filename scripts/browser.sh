# Sourced by scripts/test.sh: make sure the dashboard's browser tests (tests/acceptance/web)
# have Debian's headless Chromium and its ChromeDriver.  Installs the packages
# chromium and chromium-driver with apt-get when they are missing and we are
# root; otherwise the browser tests skip, saying why.  Sets
# VENTURI_BROWSER_READY=1 when both are there, which makes a missing browser a
# test failure instead of a skip.
_have_browser() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }
if ! _have_browser && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "browser.sh: installing chromium and chromium-driver (apt-get) for the dashboard's browser tests" >&2
    if ! { apt-get update -qq >/dev/null &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }; then
        echo "browser.sh: apt-get could not install them; the browser tests will be skipped" >&2
    fi
fi
if _have_browser; then
    export VENTURI_BROWSER_READY=1
fi
