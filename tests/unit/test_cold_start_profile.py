"""The pure cold-start profile (emulator/model/cold_start.py): the sum, what dominates and its words,
the budget text, the log lines and the JSON round trip; and smlocal check's preflight judgement of it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from contract_tests import cold_start as check_cold_start
from contract_tests.cold_start import FirstStart
from contract_tests.running import Startup
from emulator.model import cold_start as cs
from emulator.model.cold_start import ColdStartProfile, Phase, human_bytes
from emulator.model_data.timings import MaterializeTimings


def _profile(**overrides: float) -> ColdStartProfile:
    seconds = {
        cs.IMAGE: 0.5,
        cs.DOWNLOAD: 66.7,
        cs.EXTRACTION: 8.0,
        cs.CONTAINER: 1.2,
        cs.ACCEPT: 9.0,
        cs.PING: 6.0,
        **overrides,
    }
    measured = [
        Phase(cs.PING, seconds[cs.PING]),  # any order: build sorts them
        Phase(cs.IMAGE, seconds[cs.IMAGE], 1_200_000_000),
        Phase(cs.DOWNLOAD, seconds[cs.DOWNLOAD], 18_000_000_000),
        Phase(cs.EXTRACTION, seconds[cs.EXTRACTION]),
        Phase(cs.CONTAINER, seconds[cs.CONTAINER]),
        Phase(cs.ACCEPT, seconds[cs.ACCEPT]),
    ]
    return ColdStartProfile.build("e", "AllTraffic", "i-0123", 1.7e9, 94.0, measured, 480.0, 3600.0)


def test_phases_in_order_with_other_as_the_rest() -> None:
    profile = _profile()
    assert [p.name for p in profile.phases] == list(cs.ORDER)
    other = profile.phase(cs.OTHER)
    assert other is not None and other.seconds == pytest.approx(94.0 - 91.4)
    assert profile.total_s == pytest.approx(profile.wall_s)


def test_other_never_below_zero() -> None:
    profile = ColdStartProfile.build("e", "v", "i", 0.0, 1.0, [Phase(cs.CONTAINER, 1.2)], 480.0)
    other = profile.phase(cs.OTHER)
    assert other is not None and other.seconds == 0.0


def test_dominance_text_names_share_bytes_rate_and_advice() -> None:
    profile = _profile()
    assert profile.dominant.name == cs.DOWNLOAD
    assert profile.dominance_text() == (
        "model data download 71 % of 94 s: 18 GB at 270 MB/s; "
        "consider uncompressed model data or a smaller artifact"
    )


def test_an_uncompressed_download_is_not_told_to_go_uncompressed() -> None:
    text = _profile(**{cs.EXTRACTION: 0.0}).dominance_text()
    assert text.endswith("; " + cs.UNCOMPRESSED_DOWNLOAD_ADVICE)
    assert "consider uncompressed" not in text


def test_another_phase_dominating_gets_its_own_advice() -> None:
    profile = _profile(**{cs.DOWNLOAD: 1.0, cs.ACCEPT: 70.0})
    assert profile.dominance_text().startswith("first TCP accept 74 % of 94 s; the server takes")


def test_cached_model_data() -> None:
    profile = ColdStartProfile.build(
        "e", "v", "i", 0.0, 2.0, [Phase(cs.DOWNLOAD, 0.01, None, "cached"), Phase(cs.PING, 1.5)], 480.0
    )
    assert profile.model_data_cached
    assert profile.log_lines()[0] == "cold start: model data download 0.010 s (0.5 %) cached"


def test_budget_text_counts_from_the_container_start() -> None:
    profile = _profile()
    assert profile.health_used_s == pytest.approx(15.0)
    assert profile.budget_text() == (
        "health check budget: 15 s of 480 s (8 min) used, 465 s left; "
        "model data budget: 75 s of 3600 s (60 min) used"
    )
    configured = ColdStartProfile.build("e", "v", "i", 0.0, 5.0, [Phase(cs.ACCEPT, 5.0)], 90.0)
    assert configured.budget_text() == "health check budget: 5.0 s of 90 s used, 85 s left"


def test_log_lines_one_per_phase_then_the_summary() -> None:
    profile = _profile()
    lines = profile.log_lines()
    assert len(lines) == len(cs.ORDER) + 1
    assert lines[1].startswith("cold start: model data download 66.700 s (71.0 %) 18 GB at 270 MB/s")
    assert lines[-1].startswith("cold start: ready after 94.000 s; model data download 71 %")


def test_json_round_trip_and_first_invocation() -> None:
    profile = _profile().with_first_invocation(0.25)
    data = profile.to_json()
    assert data["Dominant"] == cs.DOWNLOAD
    assert data["Phases"][1]["BytesPerSecond"] == round(18e9 / 66.7)
    again = ColdStartProfile.from_json(data)
    assert again.dominance_text() == profile.dominance_text()
    assert again.first_invocation_s == 0.25
    assert again.rows()[-1][0] == "first invocation"


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (999, "999 B"), (1500, "1.5 kB"), (25_000_000, "25 MB"), (18e9, "18 GB")]
)
def test_human_bytes(n: float, text: str) -> None:
    assert human_bytes(n) == text


def test_phases_text_one_line() -> None:
    assert _profile().phases_text() == (
        "ready after 94 s: image resolution 0.5 s (1.2 GB image), model data download 67 s "
        "(18 GB at 270 MB/s), model data extraction 8.0 s, container start 1.2 s, first TCP accept "
        "9.0 s, first /ping 200 6.0 s, other 2.6 s"
    )


def test_a_quick_start_gets_no_advice() -> None:
    profile = ColdStartProfile.build("e", "v", "i", 0.0, 0.5, [Phase(cs.CONTAINER, 0.3)], 480.0)
    assert profile.dominance_text() == "container start 60 % of 0.5 s; a quick start: nothing to act on"


def test_the_preflight_judgement_of_a_start() -> None:
    def target(model_data_s: float, first_healthy_s: float) -> object:
        startup = Startup(
            True, False, None, first_healthy_s, first_healthy_s, first_healthy_s, 1, "", 0.0, b"", ""
        )
        measured = FirstStart(
            0.1, model_data_s, MaterializeTimings(download_bytes=1, total_s=model_data_s), 0.2, startup
        )
        config = SimpleNamespace(image="img", limits=SimpleNamespace(startup_timeout_s=480.0))
        return SimpleNamespace(measured=measured, config=config, image=SimpleNamespace(size_bytes=10))

    fits = check_cold_start.judgement(target(5.0, 2.0))  # type: ignore[arg-type]
    assert fits is not None and fits.accepted and fits.name == "cold start"
    slow = check_cold_start.judgement(target(4000.0, 2.0))  # type: ignore[arg-type]
    assert slow is not None and not slow.accepted and slow.reason == "model data took 4000 s of 3600 s"
