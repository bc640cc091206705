"""Every CLI call to /_smlocal/ goes through emulator.admin_client and carries X-Smlocal-Admin: 1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from emulator.admin_client import ADMIN_HEADER, ServerUnreachable, admin_request, admin_stream, error_message


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    seen: list[tuple[str, str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append((self.command, self.path, self.headers.get(ADMIN_HEADER)))
            body = b'{"message": "No logs for endpoint x."}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_requests_and_streams_send_the_admin_header(
    recorder: tuple[str, list[tuple[str, str, str | None]]],
) -> None:
    url, seen = recorder
    answer = admin_request(url, "POST", "shutdown")
    assert error_message(answer) == "No logs for endpoint x."
    admin_request(url + "/", "GET", "/endpoints/x/logs", params={"tail": "3"})
    with admin_stream(url, "endpoints/x/logs", timeout=httpx.Timeout(5)) as stream:
        assert stream.status_code == 404
    assert seen == [
        ("POST", "/_smlocal/shutdown", "1"),
        ("GET", "/_smlocal/endpoints/x/logs?tail=3", "1"),
        ("GET", "/_smlocal/endpoints/x/logs", "1"),
    ]


def test_no_server_is_one_error() -> None:
    with pytest.raises(ServerUnreachable, match=r"^No smlocal server answers at http://127\.0\.0\.1:1 \("):
        admin_request("http://127.0.0.1:1", "GET", "health", timeout=2)
