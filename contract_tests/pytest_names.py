"""How pytest's terminal names the contract items: `smlocal-contract::start.listens`, from any folder.

The items' node ids are `smlocal-contract::<check id>` wherever pytest runs (stable: `-k`, --deselect,
--lf and the JUnit XML see them so). But pytest takes the part before the first `::` for a file path
relative to the rootdir and prints it relative to the folder pytest was started in: run from another
folder than the rootdir (a sub-folder of a project whose pyproject.toml holds the pytest settings, or
`--rootdir`), the items would read `../../../smlocal-contract::start.listens`. The suite is no file,
so its items are printed as their node ids, and skips are located at `smlocal-contract`, whatever the
folder. pytest has no hook for this: the two functions the terminal reporter reads paths with are
wrapped on this run's objects only (Config.cwd_relative_nodeid, public; the reporter's
write_fspath_result, left alone when a pytest lacks it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def in_suite(nodeid: object, suite: str) -> bool:
    """Whether `nodeid` (a string, or pytest's NodeId) is the suite's or one of its items'."""
    return str(nodeid).split("::", 1)[0] == suite


def location(config: pytest.Config, suite: str) -> Path:
    """Where the suite's items say they are (Item.reportinfo): `suite` in the folder pytest was started
    in, so that a skip's location reads `smlocal-contract:1`. (Item.location, relative to the rootdir,
    stays `suite`: ContractItem says so, as -vv compares it with the node id.)"""
    return Path(config.invocation_params.dir) / suite


def keep_names(config: pytest.Config, suite: str) -> None:
    """Make this run's terminal print the suite's node ids as they are (see the module's docstring)."""
    relative = config.cwd_relative_nodeid

    def cwd_relative_nodeid(nodeid: Any) -> Any:
        return nodeid if in_suite(nodeid, suite) else relative(nodeid)

    config.cwd_relative_nodeid = cwd_relative_nodeid  # type: ignore[method-assign]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    write = getattr(reporter, "write_fspath_result", None)
    if reporter is None or write is None:  # -p no:terminal, or a pytest that writes paths otherwise
        return

    def write_fspath_result(nodeid: str, res: str, **markup: bool) -> None:
        if in_suite(nodeid, suite):
            # an absolute path: the reporter joins it to the rootdir (no change) and prints it relative
            # to the folder pytest was started in, i.e. as `suite`
            nodeid = str(location(config, suite)) + nodeid[len(suite) :]
        write(nodeid, res, **markup)

    reporter.write_fspath_result = write_fspath_result
