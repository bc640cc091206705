"""`smlocal profile ENDPOINT`: the cold start of the endpoint's last instance start (`--all`: every
start the server measured), through the admin route `/_smlocal/endpoints/NAME/cold-starts`.

Each profile is a table of its phases (seconds, share of the wall time, what each moved), then what
dominates and the startup budget left (emulator/model/cold_start.py words them). A live instance the
server adopted after a restart has no profile: the command says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from emulator.admin_client import admin_request, error_message
from emulator.commands.client import endpoint_url
from emulator.model.cold_start import ColdStartProfile


def profile_table(profile: ColdStartProfile) -> Any:
    """A rich Table of one profile (rows from ColdStartProfile.rows)."""
    from rich.table import Table

    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(profile.started_at))
    table = Table(
        title=f"{profile.endpoint} / {profile.variant} / {profile.instance_id} (deploy started {started})",
        title_justify="left",
    )
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    table.add_column("detail", overflow="fold")
    for row in profile.rows():
        table.add_row(*row)
    return table


def print_profiles(document: dict[str, Any], show_all: bool) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console()
    profiles = [ColdStartProfile.from_json(p) for p in document.get("Profiles", [])]
    for profile in profiles if show_all else profiles[-1:]:
        console.print(profile_table(profile))
        console.print(Text(profile.dominance_text(), style="bold"), soft_wrap=True)
        console.print(Text(profile.budget_text()), soft_wrap=True)
    if not profiles:
        console.print(Text(f"No instance start of {document['EndpointName']} was measured by this server."))
    for missing in document.get("WithoutProfile", []):
        console.print(
            Text(f"{missing['VariantName']}/{missing['InstanceId']}: no profile ({missing['Reason']})"),
            soft_wrap=True,
        )


def cmd_profile(args: argparse.Namespace) -> int:
    resp = admin_request(endpoint_url(args), "GET", f"endpoints/{args.endpoint}/cold-starts")
    if resp.status_code != 200:
        print(f"smlocal: {error_message(resp)}", file=sys.stderr)
        return 1
    document: dict[str, Any] = resp.json()
    if args.json:
        if not args.all:
            document = {**document, "Profiles": document.get("Profiles", [])[-1:]}
        print(json.dumps(document, indent=2))
        return 0
    print_profiles(document, args.all)
    return 0
