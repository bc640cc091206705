"""The measurement side of the cold start without Docker: MaterializeTimings (the thread-current
recording, the model data phases), the fleet's PlanSetup / InstanceClock / ColdStarts, readiness's
first answer, and `smlocal metrics`' lines."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from emulator.hosting.fleet.cold_start import ColdStarts, InstanceClock, PlanSetup
from emulator.hosting.fleet.readiness import Outcome, PingPolicy, wait_until_healthy
from emulator.metrics_table import cold_start_lines
from emulator.model import cold_start as cs
from emulator.model.cold_start import ColdStartProfile, Phase
from emulator.model_data import timings
from emulator.model_data.timings import MaterializeTimings


def test_recording_is_the_threads_own_and_adds_up() -> None:
    mine = MaterializeTimings()
    seen: list[MaterializeTimings] = []
    with timings.recording(mine):
        timings.current().add_download(10)
        other = threading.Thread(target=lambda: seen.append(timings.current()))
        other.start()
        other.join()
    with timings.recording(mine):  # a second call (another container's model data) adds to it
        timings.current().add_download(5)
    assert mine.download_bytes == 15 and mine.total_s > 0
    assert seen[0] is not mine  # another thread records into a throwaway
    timings.current().add_download(1)  # outside any call: a throwaway too
    assert mine.download_bytes == 15


def test_model_data_phases() -> None:
    fetched = MaterializeTimings(download_bytes=1000, extraction_s=0.5, total_s=2.5)
    download, extraction = fetched.phases()
    assert (download.seconds, download.bytes, download.note) == (2.0, 1000, "")
    assert download.throughput == pytest.approx(500.0)
    assert extraction.seconds == 0.5
    assert fetched.phases(3.0)[0].seconds == 2.5  # a longer span measured around the calls
    cached = MaterializeTimings(cached=True, total_s=0.01)
    assert cached.phases()[0].note == "cached" and cached.phases()[0].bytes is None
    assert MaterializeTimings(mounted=True).phases()[0].note == "a local directory, mounted as it is"


def test_instance_clock_profile_covers_its_wall_time(tmp_path: Path) -> None:
    setup = PlanSetup(started=100.0, started_at=1.7e9, image_s=0.1, image_bytes=5_000_000)
    setup.model_data = MaterializeTimings(download_bytes=40_000_000, extraction_s=0.4, total_s=4.4)
    clock = InstanceClock(setup, container_began=104.6, container_started=105.0)
    profile = clock.profile("e", "AllTraffic", "i-1", first_answer=105.5, healthy=106.0, health_budget_s=480)
    seconds = {p.name: p.seconds for p in profile.phases}
    assert profile.wall_s == pytest.approx(6.0)
    assert seconds == pytest.approx(
        {
            cs.IMAGE: 0.1,
            cs.DOWNLOAD: 4.0,
            cs.EXTRACTION: 0.4,
            cs.CONTAINER: 0.4,
            cs.ACCEPT: 0.5,
            cs.PING: 0.5,
            cs.OTHER: 0.1,
        }
    )
    assert profile.dominant.name == cs.DOWNLOAD and profile.health_used_s == pytest.approx(1.0)

    records = ColdStarts(tmp_path)
    records.record(profile)
    records.first_invocation("e", "i-1", 0.2)
    (kept,) = records.profiles("e")
    assert kept.first_invocation_s == 0.2
    lines = records.stream_path("e", "AllTraffic", "i-1").read_text().splitlines()
    assert len(lines) == len(profile.phases) + 1 and "cold start: ready after 6.000 s" in lines[-1]


def test_a_later_instance_has_its_own_clock_and_cached_model_data() -> None:
    setup = PlanSetup(started=10.0, later=True, model_data=MaterializeTimings(cached=True))
    clock = InstanceClock(setup, container_began=10.0, container_started=10.3)
    profile = clock.profile("e", "v", "i-2", first_answer=None, healthy=11.0, health_budget_s=60)
    assert profile.wall_s == pytest.approx(1.0)
    assert profile.model_data_cached
    image = profile.phase(cs.IMAGE)
    assert image is not None and image.note == "resolved at the deploy"
    ping = profile.phase(cs.PING)
    assert ping is not None and ping.seconds == 0.0  # no answer before the 200: it was the first


def test_smlocal_metrics_prints_a_line_per_measured_start() -> None:
    profile = ColdStartProfile.build("e", "AllTraffic", "i-1", 0.0, 5.0, [Phase(cs.ACCEPT, 4.0)], 480.0)
    assert cold_start_lines({"ColdStarts": [profile.to_json()]}) == [
        "cold start AllTraffic/i-1: ready after 5.00 s; first TCP accept 80 % of 5.0 s; the server takes "
        "this long to listen: load the model after it listens, trim imports"
    ]
    assert cold_start_lines({}) == []


async def test_readiness_times_the_first_answer_and_the_first_200_apart() -> None:
    """A 503 is the first answer (the first TCP accept that got HTTP), the 200 two polls later."""
    statuses = iter([503, 503, 200])

    async def ping(request: web.Request) -> web.Response:
        return web.Response(status=next(statuses))

    app = web.Application()
    app.router.add_get("/ping", ping)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            policy = PingPolicy(deadline_s=5.0, attempt_timeout_s=1.0, interval_s=0.05)
            result = await wait_until_healthy(session, url, policy, asyncio.Event())
    finally:
        await runner.cleanup()
    assert result.outcome is Outcome.HEALTHY and result.attempts == 3
    assert result.first_answer is not None
    assert result.started < result.first_answer < result.ended
    assert result.ended - result.first_answer >= 0.09  # two poll intervals between the answers
