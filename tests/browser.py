"""Headless Chromium for tests: render a page to a PNG and list what would go wrong loading it offline.

Chromium's own command line does the work (``--headless --dump-dom``, then ``--screenshot``), with
its console written to stderr (``--enable-logging=stderr``) and every host name unresolvable (the
network is off). Its command line cannot report a failed request, which is the one error a page
without script can have, so the DOM Chromium parsed is searched instead for everything it would
request (``src``, ``href``, ``srcset``, CSS ``url()`` and ``@import``): a self-contained page
requests nothing but in-page anchors and ``data:`` URIs, so nothing of it can fail to load.
"""

import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

# Chromium's log line for a console message or an uncaught exception: ... :CONSOLE(12)] "text", source: URL (12)
CONSOLE = re.compile(r':CONSOLE[:(]\d+\)?\] "(.*)", source: ')
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]*)|@import\s+['"]([^'"]*)""")


def chromium() -> str | None:
    """The Chromium executable on PATH (Debian package ``chromium``), or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def render(page: Path, screenshot: Path, *, width: int = 1400, height: int = 2400, timeout: float = 60) -> list[str]:
    """Load ``page`` in headless Chromium, write a ``width`` x ``height`` PNG of its top to
    ``screenshot`` and return its problems: the console's messages (a page without script has
    none) and every URL it requests other than an in-page anchor or a ``data:`` URI.

    Raises
    ------
    RuntimeError
        If Chromium is not installed or fails; subprocess.TimeoutExpired if it takes over ``timeout`` seconds.
    """
    dom, console = _chromium(page, ["--dump-dom"], timeout)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    _chromium(
        page, [f"--screenshot={screenshot.resolve()}", f"--window-size={width},{height}", "--hide-scrollbars"], timeout
    )
    return console + [f"requests {url}" for url in _requests(dom)]


def _chromium(page: Path, flags: list[str], timeout: float) -> tuple[str, list[str]]:
    """Chromium's stdout and the console messages it logged."""
    executable = chromium()
    if executable is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(
        prefix="chromium-"
    ) as profile:  # its own profile: never hand over to a running browser
        done = subprocess.run(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
             "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND", *flags, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout, [match[1] for match in CONSOLE.finditer(done.stderr)]


class _Requests(HTMLParser):
    """Every URL a parsed page refers to in an attribute or in CSS."""

    def __init__(self):
        super().__init__()
        self.urls, self.in_style = [], False

    def handle_starttag(self, tag, attrs):
        self.in_style = tag == "style"
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "poster", "data", "background") and value:
                self.urls.append(value.strip())
            elif name in ("srcset", "imagesrcset") and value:
                self.urls += [candidate.split()[0] for candidate in value.split(",") if candidate.strip()]
            elif name == "style" and value:
                self._css(value)

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self._css(data)

    def _css(self, css):
        self.urls += [url or imported for url, imported in CSS_URL.findall(css)]


def _requests(dom: str) -> list[str]:
    parser = _Requests()
    parser.feed(dom)
    return [url for url in parser.urls if not url.startswith(("#", "data:"))]
