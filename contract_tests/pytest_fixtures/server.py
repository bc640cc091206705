"""The `smlocal_server` fixture's server: a `smlocal serve` subprocess of its own, or one already running.

A started server listens on a free 127.0.0.1 port with a fresh temporary state dir (so its containers
carry an owner label of their own: emulator/runtime/labels.py) and counts as up once its health route
answers with that owner. Its environment is the caller's; when that has no AWS credentials at all the
server gets the clients' dummy pair (clients.py), so its S3 and SNS calls (model data, asynchronous
inference, against a local S3 such as moto's) are signed instead of failing with NoCredentialsError.
At the end it is sent SIGTERM (it stops and removes its containers), killed if it does not exit in
time, and whatever container of its owner is still there is removed the way
`smlocal down --state-dir` does; then the state dir goes. An external server (--smlocal-url) is only
checked to answer: it is neither started nor stopped.

Standard library only at import time; the engine is reached (emulator.down, emulator.runtime) only to
clean up after a server that did not clean up after itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds a started server has to answer its health route.
DEFAULT_START_TIMEOUT_S = 60.0
#: Seconds a server has to exit after SIGTERM (its containers get `--stop-grace` each, in parallel).
EXIT_MARGIN_S = 20.0


class ServerStartError(Exception):
    """The server did not come up (it exited, or did not answer in time); the message has its log."""


@dataclass
class SmlocalServer:
    """An smlocal server the fixtures talk to.

    url: boto3's endpoint_url (`http://127.0.0.1:PORT`). region: the region its ARNs use and the
    clients sign for. state_dir: the started server's state dir (its containers' owner), None for an
    external server. owner: the `smlocal.owner` label of its containers (None when external and it
    did not say). pid: the started server's process id (None when external).
    """

    url: str
    region: str
    state_dir: Path | None = None
    owner: str | None = None
    pid: int | None = None
    #: Containers of this server that were still there after it exited (removed then); 0 is right.
    leftover_containers: int = 0
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_path: Path | None = field(default=None, repr=False)

    @property
    def started(self) -> bool:
        """True for a server these fixtures started (and will stop)."""
        return self._process is not None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of a started server's own output (empty for an external one)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop a started server and remove what it left; nothing for an external one."""
        process = self._process
        if process is None or self.state_dir is None:
            return
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=grace_s + EXIT_MARGIN_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
            self.leftover_containers = _remove_leftovers(self.state_dir, self.url)
        finally:
            self._process = None
            shutil.rmtree(self.state_dir, ignore_errors=True)
            if self._log_path is not None:
                self._log_path.unlink(missing_ok=True)


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def health(url: str, timeout_s: float = 2.0) -> dict[str, object] | None:
    """The server's `/_smlocal/health` answer, None when nothing (or not smlocal) answers."""
    try:
        with urllib.request.urlopen(f"{url}/_smlocal/health", timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def external_server(url: str, region: str) -> SmlocalServer:
    """A running server named by --smlocal-url / SMLOCAL_URL, checked to answer."""
    url = url.rstrip("/")
    found = health(url, timeout_s=5.0)
    if found is None:
        raise ServerStartError(
            f"no smlocal server answers at {url} (--smlocal-url / SMLOCAL_URL); "
            "start one with `smlocal serve`"
        )
    owner = found.get("owner")
    return SmlocalServer(url=url, region=region, owner=str(owner) if owner else None)


def start_server(
    region: str,
    extra_args: list[str],
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    python: str = sys.executable,
) -> SmlocalServer:
    """Start `smlocal serve` on a free loopback port with a new state dir; wait until it answers."""
    from emulator.runtime.labels import owner_id

    state_dir = Path(tempfile.mkdtemp(prefix="smlocal-pytest-")).resolve()
    fd, log_name = tempfile.mkstemp(prefix="smlocal-pytest-", suffix=".log")
    log_path = Path(log_name)
    owner = owner_id(state_dir)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        python,
        "-m",
        "emulator.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--state-dir",
        str(state_dir),
        "--region",
        region,
        *extra_args,
    ]
    with os.fdopen(fd, "wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=server_environment(),
        )
    server = SmlocalServer(
        url=url, region=region, state_dir=state_dir, owner=owner, pid=process.pid, _process=process
    )
    server._log_path = log_path
    deadline = time.monotonic() + timeout_s
    while True:
        found = health(url, timeout_s=1.0)
        if found is not None and found.get("owner") == owner:
            return server
        code = process.poll()
        if code is not None or time.monotonic() > deadline:
            what = f"exited with status {code}" if code is not None else f"did not answer in {timeout_s:g} s"
            tail = server.log_tail()
            server.stop()
            raise ServerStartError(f"smlocal serve ({' '.join(command[3:])}) {what}; its output:\n{tail}")
        time.sleep(0.05)


#: Environment variables through which a machine hands out real credentials that only the network
#: can turn into keys (ECS/CodeBuild task roles, web identity): their presence counts as credentials.
_NETWORK_CREDENTIALS = (
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def server_environment() -> dict[str, str]:
    """The started server's environment: this process's, plus the dummy credentials the clients use
    when it has none (keys, a profile, the shared files, a task role or web identity). Instance
    metadata is never asked: a machine that relies on it sets no variable, and gets the dummy pair."""
    from contract_tests.pytest_fixtures.clients import DUMMY_KEY

    environ = dict(os.environ)
    if any(environ.get(name) for name in _NETWORK_CREDENTIALS) or _local_credentials():
        return environ
    return {**environ, "AWS_ACCESS_KEY_ID": DUMMY_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_KEY}


def _local_credentials() -> bool:
    """Whether botocore finds credentials in the environment or the shared files, without the
    network."""
    import botocore.session

    resolver = botocore.session.Session().get_component("credential_provider")
    for provider in ("container-role", "iam-role"):  # both ask the network
        resolver.remove(provider)
    try:
        return resolver.load_credentials() is not None
    except Exception:  # noqa: BLE001 - a broken profile: the server fails the same way, and says so
        return True


def _remove_leftovers(state_dir: Path, url: str) -> int:
    """Remove containers of this state dir's owner that outlived its server (as `smlocal down
    --state-dir` does); how many there were. No engine: nothing can be left."""
    from emulator.errors import SmlocalError
    from emulator.runtime.docker import DockerRuntime
    from emulator.runtime.labels import MANAGED_SELECTOR, OWNER, owner_id

    runtime = DockerRuntime()
    try:
        runtime.ping()
        left = runtime.list({**MANAGED_SELECTOR, OWNER: owner_id(state_dir)})
        if left:
            from emulator.down import down

            down(state_dir, url, grace_s=5.0)
        return len(left)
    except SmlocalError:
        return 0
    finally:
        runtime.close()


def endpoint_logs(url: str, endpoint: str, tail: int = 200, timeout_s: float = 10.0) -> str:
    """The endpoint's container logs from the server's logs route (`smlocal logs`'s), the last `tail`
    lines of each stream, each line prefixed by its stream `variant/instance-id`; "" when it has
    none (an unknown endpoint) and a one-line note when the server could not be asked."""
    from urllib.parse import quote

    try:
        with urllib.request.urlopen(
            f"{url}/_smlocal/endpoints/{quote(endpoint)}/logs?tail={tail}", timeout=timeout_s
        ) as resp:
            return str(resp.read().decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return ""
        return f"(smlocal answered {exc.code} to the logs request)"
    except OSError as exc:
        return f"(could not read the logs: {exc})"
