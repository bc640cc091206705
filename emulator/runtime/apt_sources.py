"""The host's Debian mirror, read from its apt sources (one-line and deb822), for debootstrap.

smlocal's local base image (emulator/runtime/base_image.py) is bootstrapped from the mirror the
host's apt already uses: on machines without a registry it is the one package source known to work.
"""

from __future__ import annotations

import re
from pathlib import Path

DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"  # Debian 12: Python 3.11, like python:3.11-slim


def apt_mirror(
    sources_list: Path = Path("/etc/apt/sources.list"),
    sources_dir: Path = Path("/etc/apt/sources.list.d"),
    suite: str = SUITE,
) -> str:
    """The host's Debian mirror for `suite` (one-line or deb822 sources), else deb.debian.org."""
    texts: list[tuple[str, bool]] = []
    if sources_list.is_file():
        texts.append((sources_list.read_text(errors="replace"), False))
    if sources_dir.is_dir():
        for path in sorted(sources_dir.iterdir()):
            if path.suffix == ".list":
                texts.append((path.read_text(errors="replace"), False))
            elif path.suffix == ".sources":
                texts.append((path.read_text(errors="replace"), True))
    for text, deb822 in texts:
        found = mirror_from_deb822(text, suite) if deb822 else mirror_from_one_line(text, suite)
        if found:
            return found
    return DEFAULT_MIRROR


def mirror_from_one_line(text: str, suite: str = SUITE) -> str | None:
    """First `deb URI SUITE ...` line of a sources.list (options in [brackets] allowed)."""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "deb" and fields[2] == suite:
            return fields[1].rstrip("/")
    return None


def mirror_from_deb822(text: str, suite: str = SUITE) -> str | None:
    """First URI of an enabled `Types: deb` stanza whose Suites include SUITE."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for raw in stanza.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0] in " \t" and key:  # continuation line
                fields[key] += " " + raw.strip()
                continue
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        if suite not in fields.get("suites", "").split():
            continue
        uris = fields.get("uris", "").split()
        if uris:
            return uris[0].rstrip("/")
    return None
