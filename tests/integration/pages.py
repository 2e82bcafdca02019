"""Self-contained pages (report.html, campaign.html) as a browser sees them: what they would load by themselves,
and the text headless Chromium renders of them."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from tests.components import missing

CHROMIUM = "chromium-headless-shell"
FLAGS = ["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND"]


class Resources(HTMLParser):
    """Every URL the page would load by itself (src, href of a link, CSS url()), and its visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self._in_style = tag == "style"
        if tag in ("script", "iframe", "object", "embed"):
            self.urls.append(f"<{tag}>")
        for key in ("src", "srcset", "poster", "data"):
            if found.get(key):
                self.urls.append(str(found[key]))
        if tag == "link" and found.get("href"):
            self.urls.append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += re.findall(r"url\(([^)]*)\)|@import\s+\S+", data)
        else:
            self.text.append(data)


def rendered_text(page: Path) -> str:
    """The visible text of ``page`` once headless Chromium has rendered it (nothing reachable on the network)."""
    if shutil.which(CHROMIUM) is None:
        missing(CHROMIUM, f"{CHROMIUM} is not on the PATH")
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    shown = Resources()
    shown.feed(dom)
    return " ".join(shown.text)
