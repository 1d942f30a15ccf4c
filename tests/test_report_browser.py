"""The report page in a real browser: headless Chromium opens report.html from disk.

Chromium is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: NUL-separated JSON on file descriptors 3 and 4),
so no websocket client or browser-automation package is needed. The test
checks that the page loads with no console error and no network request,
that every figure decodes (``naturalWidth > 0``), that a screenshot is
produced, and that corpus text carrying ``<script>`` shows as text and never
runs. ``tests/run.sh`` installs Debian's ``chromium`` when it is absent (as
root, with apt-get); otherwise this test is skipped.
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.reports.build import build_report

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (tests/run.sh installs Debian's chromium package when "
                             "run as root with apt-get; or: apt-get install --no-install-recommends chromium)")

SCRIPT_TEXT = "<script>alert(1)</script>"
PWN_TEXT = "<script>window.__pwned = 1; document.title = 'pwned'</script>"
IMG_TEXT = '<img src=x onerror="window.__pwned = 2">'
WORDS = ("apple", "banana", "cherry", "delta", "engine", "forest", "garden", "harbor", "island", "jungle",
         "kettle", "lemon", "meadow", "needle", "orange", "pepper", "quartz", "river", "saddle", "timber")


_TRAMPOLINE = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execvp(sys.argv[3], sys.argv[3:])"


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe."""

    def __init__(self, executable: str, profile_dir, timeout: float = 30.0):
        self.log_path = Path(profile_dir).with_suffix(".log")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in close(); the browser writes to it)
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        # The child's ends move above fd 9 so that placing one on fd 3 or 4 cannot clobber the other.
        commands_read, replies_write = (_high_fd(commands_read), _high_fd(replies_write))
        args = [executable, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
                f"--user-data-dir={profile_dir}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage",
                "about:blank"]
        # Chromium reads commands from fd 3 and writes replies to fd 4: a Python trampoline puts the pipe
        # ends there and execs the browser.
        self.process = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, str(commands_read), str(replies_write), *args],
            pass_fds=(commands_read, replies_write), stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(commands_read)
        os.close(replies_write)
        self.timeout = timeout
        self.events: list[dict] = []
        self._buffer = b""
        self._next_id = 0

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer in time; its log ends:\n{self.log_tail()}")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe; its log ends:\n{self.log_tail()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def log_tail(self, lines: int = 15) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self):
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._log.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory, ray_holder):
    ray_holder.start()
    tmp = tmp_path_factory.mktemp("browser")
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 30)))) for _ in range(40)]
    texts[0] = f"{SCRIPT_TEXT} {texts[0]}"
    texts[1] = f"{PWN_TEXT} {texts[1]}"
    texts[2] = f"{IMG_TEXT} {texts[2]}"
    corpus = tmp / "texts.json"
    corpus.write_text(json.dumps({"text": texts}))
    execute_run(config_from_dict({"corpus": {"path": str(corpus), "preprocess": False}, "target": {"k": 2},
                                "attack": {"shadows": 4}, "ray": {"num_cpus": 1}, "name": "browser",
                                "output": str(tmp / "run")}), quiet=True)
    return build_report([tmp / "run"], tmp / "report", top=len(texts), show_text=True)


PAGE_STATE = """JSON.stringify({
  title: document.title,
  pwned: window.__pwned === undefined ? null : window.__pwned,
  scripts: document.scripts.length,
  images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth})),
  text: document.body.innerText,
})"""


def test_report_opens_from_disk_without_errors(report, tmp_path):
    browser = DevTools(CHROMIUM, tmp_path / "profile")
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
        url = (report / "report.html").resolve().as_uri()
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        state = json.loads(browser.send("Runtime.evaluate", {"expression": PAGE_STATE, "returnByValue": True},
                                        session=session)["result"]["value"])
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                            session=session)
        (report / "screenshot.png").write_bytes(base64.b64decode(shot["data"]))
        events = list(browser.events)
    finally:
        browser.close()

    errors = [e for e in events if e.get("method") in ("Runtime.exceptionThrown", "Page.javascriptDialogOpening")
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == [], f"console errors: {errors}"
    requested = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    assert requested and all(u.startswith(("file:", "data:")) for u in requested), requested  # no network

    assert len(state["images"]) == 2 and all(i["complete"] and i["width"] > 0 for i in state["images"])
    assert state["title"].startswith("topicaudit report") and state["pwned"] is None and state["scripts"] == 0
    for text in (SCRIPT_TEXT, PWN_TEXT, IMG_TEXT):
        assert text in state["text"]  # shown as text, not parsed as markup
    assert "discloses membership" in state["text"]

    screenshot = (report / "screenshot.png").read_bytes()
    assert screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(screenshot) > 10_000


LAYOUT = """JSON.stringify({
  verdict: (document.querySelector('.verdict') || {getBoundingClientRect: () => null}).getBoundingClientRect(),
  verdictText: (document.querySelector('.verdict') || {innerText: ''}).innerText,
  ledger: (document.getElementById('ledger') || {getBoundingClientRect: () => null}).getBoundingClientRect(),
  pageWidth: document.documentElement.scrollWidth,
  scrolled: Array.from(document.querySelectorAll('.scroll')).filter(d => d.scrollWidth > d.clientWidth).length,
  viewport: window.innerWidth,
})"""


@pytest.fixture(scope="module")
def canary_report(tmp_path_factory, ray_holder):
    """A run with shadow models and canaries: its verdict comes from both, its ledger has every column."""
    ray_holder.start()
    tmp = tmp_path_factory.mktemp("browser-canaries")
    execute_run(config_from_dict({"synthetic": {"n_docs": 300, "n_words": 800}, "target": {"k": 4},
                                "attack": {"shadows": 4, "canaries": {"count": 200}}, "ray": {"num_cpus": 1},
                                "output": str(tmp / "run")}), quiet=True)
    return build_report([tmp / "run"], tmp / "report")


def _open(browser, page: Path, width: int, height: int) -> str:
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.send("Page.enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
    browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
    browser.wait_for("Page.loadEventFired", session)
    return session


def test_the_verdict_is_on_the_first_screen_and_the_page_fits_1400px(canary_report, tmp_path):
    browser = DevTools(CHROMIUM, tmp_path / "profile")
    try:
        session = _open(browser, canary_report / "report.html", 1400, 900)
        layout = json.loads(browser.send("Runtime.evaluate", {"expression": LAYOUT, "returnByValue": True},
                                         session=session)["result"]["value"])
        shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)  # the first screen
    finally:
        browser.close()
    assert layout["verdict"] is not None and layout["ledger"] is not None
    assert layout["verdict"]["top"] < layout["ledger"]["top"]         # the answer before the details
    assert layout["verdict"]["bottom"] <= 900                          # on the first screen
    assert "canaries" in layout["verdictText"]                         # the canary bound is the answer here
    assert layout["pageWidth"] <= layout["viewport"] == 1400           # no sideways scrolling: not the page,
    assert layout["scrolled"] == 0                                     # nor a table (the ledger) in its box
    png = base64.b64decode(shot["data"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    target = os.environ.get("TOPICAUDIT_REPORT_SCREENSHOT")  # e.g. docs/report-first-screen.png, to refresh it
    if target:
        Path(target).write_bytes(png)
