"""What one materialize call spent its time on, for the cold-start profile (emulator/model/cold_start.py).

The caller passes a `MaterializeTimings` to `ArtifactStore.materialize`; while the call runs it is
the thread's current one (as the download deadline is), so the S3 fetch adds each object's bytes, the
cache its extraction's bytes and seconds, and a digest-cache hit marks it `cached`, without the timings being
handed down through every fetcher. A call without one records into a throwaway.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from emulator.model import cold_start
from emulator.model.cold_start import Phase


@dataclass
class MaterializeTimings:
    """Filled by one materialize call (its thread only): seconds and bytes of each step."""

    #: bytes fetched from S3 (the download's time is the calls' time less the extraction: phases)
    download_bytes: int = 0
    extraction_s: float = 0.0
    extracted_bytes: int = 0
    #: the model directory already existed (the digest cache): nothing fetched or built
    cached: bool = False
    #: a local directory mounted as it is (nothing fetched, nothing built)
    mounted: bool = False
    #: the whole call (every call, when one timings served several), wall clock
    total_s: float = 0.0

    def add_download(self, n_bytes: int) -> None:
        self.download_bytes += n_bytes

    def add_extraction(self, n_bytes: int, seconds: float) -> None:
        self.extracted_bytes += n_bytes
        self.extraction_s += seconds

    def phases(self, total_s: float | None = None) -> list[Phase]:
        """The model data phases of a cold-start profile: the download, then the extraction. The
        download is everything the calls did besides extracting (the HEAD, the GETs, waiting for
        another start's download of the same data, the publish), so the two cover the calls' time
        (`total_s`: a longer span the caller measured around them, e.g. with the existence check);
        its rate is the effective one. `cached`: the digest cache had the model directory."""
        total = self.total_s if total_s is None else total_s
        fetch_s = max(0.0, total - self.extraction_s)
        if self.mounted:
            download = Phase(cold_start.DOWNLOAD, fetch_s, note="a local directory, mounted as it is")
        elif self.cached and not self.download_bytes:
            download = Phase(cold_start.DOWNLOAD, fetch_s, note="cached")
        elif not self.download_bytes:
            download = Phase(cold_start.DOWNLOAD, fetch_s, note="local file")
        else:
            download = Phase(cold_start.DOWNLOAD, fetch_s, self.download_bytes)
        return [download, Phase(cold_start.EXTRACTION, self.extraction_s)]


_current = threading.local()


def current() -> MaterializeTimings:
    """The running materialize call's timings (a throwaway outside one)."""
    timings: MaterializeTimings | None = getattr(_current, "timings", None)
    return timings if timings is not None else MaterializeTimings()


@contextmanager
def recording(timings: MaterializeTimings | None) -> Iterator[MaterializeTimings]:
    """Make `timings` (or a fresh one) the thread's current while the block runs; adds to total_s."""
    timings = timings if timings is not None else MaterializeTimings()
    previous = getattr(_current, "timings", None)
    _current.timings = timings
    started = time.monotonic()
    try:
        yield timings
    finally:
        timings.total_s += time.monotonic() - started
        _current.timings = previous
