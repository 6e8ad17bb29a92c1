"""Headless Chromium for tests: load a page, collect its console errors, save a screenshot.

Chromium is driven through the DevTools protocol over ``--remote-debugging-pipe`` (JSON
messages separated by NUL bytes on file descriptors 3 and 4), so no websocket client or
browser-automation package is needed. Errors are what DevTools' console shows as errors:
``console.error``/``console.assert`` calls, uncaught exceptions and log entries of level
"error", and every request that failed (a missing file, or one to the network, which is blocked).
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chromium() -> str | None:
    """The Chromium executable on PATH (Debian package ``chromium``), or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class _Pipe:
    def __init__(self, process, to_browser, from_browser):
        self.process, self.to_browser, self.from_browser = process, to_browser, from_browser
        self.buffer, self.next_id, self.events = b"", 0, []

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Send a command and wait for its result (events received meanwhile are kept)."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def receive(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                self.process.wait()
                raise RuntimeError(f"chromium closed the DevTools pipe: {self.process.stderr.read().decode()[-2000:]}")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(message)
        if "method" in message:
            self.events.append(message)
        return message

    def wait_for(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.receive()


def render(page: Path, screenshot: Path, *, width: int = 1400, height: int = 900, timeout: float = 60) -> list[str]:
    """Load ``page`` in headless Chromium, write a full-page PNG to ``screenshot`` and return the console errors.

    Requests to the network (http, https, ws) are blocked, so a page that needs them shows errors.

    Raises
    ------
    RuntimeError
        If Chromium is not installed or the DevTools pipe fails; TimeoutError if the page does not load.
    """
    executable = chromium()
    if executable is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    profile = tempfile.mkdtemp(prefix="chromium-")  # its own profile: never hand over to a running browser
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run", f"--user-data-dir={profile}", "about:blank"]
    # The browser reads commands on fd 3 and writes replies on fd 4: a trampoline puts the pipes there.
    trampoline = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"
    process = subprocess.Popen(
        [sys.executable, "-c", trampoline, str(to_browser_r), str(from_browser_w), executable, *flags],
        pass_fds=(to_browser_r, from_browser_w), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(process, to_browser_w, from_browser_r)
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.send(f"{domain}.enable", session)
        # Offline: the page must not need the network, and a request to it shows as an error.
        pipe.send("Network.setBlockedURLs", session, urls=["http://*", "https://*", "ws://*", "wss://*"])
        pipe.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1, mobile=False)
        pipe.send("Page.navigate", session, url=page.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired", timeout)
        shot = pipe.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": _page_height(pipe, session), "scale": 1})
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        pipe.send("Browser.close")
    finally:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(to_browser_w)
        os.close(from_browser_r)
        shutil.rmtree(profile, ignore_errors=True)
    return _errors(pipe.events)


def _page_height(pipe: _Pipe, session: str) -> int:
    result = pipe.send("Runtime.evaluate", session, expression="document.documentElement.scrollHeight", returnByValue=True)
    return int(result["result"]["value"])


def _errors(events: list[dict]) -> list[str]:
    errors, urls = [], {}
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif event["method"] == "Network.loadingFailed":  # blocked (network) or missing (file)
            reason = params.get("blockedReason") and f'blocked ({params["blockedReason"]})' or params["errorText"]
            errors.append(f'failed to load {urls.get(params["requestId"], "?")}: {reason}')
        elif event["method"] == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif event["method"] == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details["text"])
        elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f'{params["entry"]["text"]} {params["entry"].get("url", "")}'.strip())
    return errors
