"""invocations.keepalive: a kept-alive connection is answered as fast as a new one (warning).

Whatever forwards requests to the model reuses its connections (HTTP/1.1 keep-alive): nginx in front
of a model, smlocal's invoker, and SageMaker's front end too, as far as anyone can tell (its connection
handling is not documented). A server that writes the response
headers and the body in two small sends with Nagle's algorithm on (Python's plain http.server, some
hand-written servers) makes the body wait for the ACK of the header segment; on a warm connection the
receiving side delays that ACK (Linux: 40 ms), so every request after the first stalls ~40 ms. On a new
connection the receiver ACKs at once, so nothing shows there.

The check measures it directly: requests on one kept-alive connection interleaved with requests on new
connections (so that load on the machine hits both alike), each request one send with TCP_NODELAY
(the client adds no stall of its own), and compares the medians. It warns only when a second round
confirms a clear, consistent difference.
"""

from __future__ import annotations

import http.client
import socket
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from contract_tests.checks.calls import baseline
from contract_tests.registry import check
from contract_tests.result import CheckSkipped
from contract_tests.target import CheckContext

#: Pairs (one kept-alive request, one on a new connection) per round.
PAIRS = 7
#: Rounds at most: a stall seen in the first round must be confirmed by the next.
ROUNDS = 2
#: A round shows a stall when the kept-alive median is this much slower than the new-connection one ...
STALL_S = 0.025
#: ... and at least this many of its pairs have the kept-alive request this much slower.
CONSISTENT_PAIRS = 5
PAIR_STALL_S = 0.015
#: Not measured when one invocation takes longer than this: a 40 ms stall is then in the noise.
MAX_INVOCATION_S = 0.5

KEEPALIVE_FIX = (
    "Send each response in one write, or set TCP_NODELAY on the server's sockets: e.g. "
    "`disable_nagle_algorithm = True` on an http.server handler and build headers and body into one "
    "buffer, `socket.setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)` on accepted sockets, or serve with "
    "gunicorn, uvicorn or aiohttp, which do both; nginx in front: keep `tcp_nodelay on;` (its default) "
    "where sendfile serves answers."
)


@dataclass
class Round:
    kept_s: list[float] = field(default_factory=list)
    fresh_s: list[float] = field(default_factory=list)

    @property
    def kept_median(self) -> float:
        return statistics.median(self.kept_s)

    @property
    def fresh_median(self) -> float:
        return statistics.median(self.fresh_s)

    @property
    def slower_pairs(self) -> int:
        return sum(k - f >= PAIR_STALL_S for k, f in zip(self.kept_s, self.fresh_s, strict=True))

    @property
    def stalled(self) -> bool:
        return self.kept_median - self.fresh_median >= STALL_S and self.slower_pairs >= CONSISTENT_PAIRS

    def describe(self) -> str:
        return (
            f"median {self.kept_median * 1000:.1f} ms on one kept-alive connection, "
            f"{self.fresh_median * 1000:.1f} ms on new connections "
            f"({self.slower_pairs} of {len(self.kept_s)} pairs >= {PAIR_STALL_S * 1000:g} ms slower)"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "kept_alive_ms": [round(s * 1000, 2) for s in self.kept_s],
            "new_connection_ms": [round(s * 1000, 2) for s in self.fresh_s],
        }


class NoKeepAlive(Exception):
    """The server closed the connection after an answer: there is no kept-alive connection to measure."""


class Prober:
    """Raw HTTP/1.1 POST /invocations, one send per request, TCP_NODELAY on the client socket."""

    def __init__(self, ctx: CheckContext, base_url: str) -> None:
        url = urlsplit(base_url)
        self.address = (url.hostname or "127.0.0.1", url.port or 80)
        self.timeout = ctx.config.limits.invocation_timeout_s
        payload = ctx.config.payloads[0]
        head = (
            f"POST /invocations HTTP/1.1\r\nHost: {self.address[0]}:{self.address[1]}\r\n"
            f"Content-Type: {payload.content_type}\r\nContent-Length: {len(payload.body)}\r\n"
            "Accept-Encoding: identity\r\n"
            + (f"Accept: {payload.accept}\r\n" if payload.accept else "")
            + "\r\n"
        )
        self.request = head.encode("latin-1") + payload.body

    def connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def exchange(self, sock: socket.socket) -> bool:
        """One request and its whole answer; True when the server keeps the connection open."""
        sock.sendall(self.request)
        response = http.client.HTTPResponse(sock, method="POST")
        response.begin()
        response.read()
        return not response.will_close

    def kept(self, sock: socket.socket) -> float:
        started = time.perf_counter()
        if not self.exchange(sock):
            raise NoKeepAlive
        return time.perf_counter() - started

    def fresh(self) -> float:
        started = time.perf_counter()
        with self.connect() as sock:
            self.exchange(sock)
        return time.perf_counter() - started


def measure(prober: Prober, sock: socket.socket) -> Round:
    result = Round()
    for _ in range(PAIRS):
        result.kept_s.append(prober.kept(sock))
        result.fresh_s.append(prober.fresh())
    return result


@check(
    "invocations.keepalive",
    "a kept-alive connection is answered without a delayed-ACK stall (warning)",
    "Whatever forwards invocations to the container reuses its connections between requests (HTTP/1.1 "
    "keep-alive: nginx, smlocal's invoker; SageMaker's own connection handling is not documented, "
    "hosting contract §3.3). A server that sends the response headers and body in separate small "
    "writes with Nagle's algorithm on makes every request on such a connection wait for a delayed ACK, "
    "about 40 ms, added to every invocation's latency. Measured: the median of requests on one "
    "kept-alive connection against new connections, interleaved; a warning when it is "
    f"{STALL_S * 1000:g} ms or more slower in {ROUNDS} rounds. A warning, not a failure: SageMaker "
    "serves such an image, only slower.",
    KEEPALIVE_FIX,
    before="class Handler(http.server.BaseHTTPRequestHandler):   # Nagle on\n"
    "    def do_POST(self):\n"
    "        self.send_response(200); self.end_headers()          # send 1: headers\n"
    "        self.wfile.write(body)                              # send 2 waits ~40 ms",
    after="class Handler(http.server.BaseHTTPRequestHandler):\n"
    "    disable_nagle_algorithm = True                          # TCP_NODELAY\n"
    "    def do_POST(self):\n"
    "        ...  # or: headers and body in one write",
)
def keepalive(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    with container.client() as client:
        first = baseline(ctx, client)
    if first.elapsed_s > MAX_INVOCATION_S:
        raise CheckSkipped(
            f"one invocation takes {first.elapsed_s * 1000:.0f} ms (over {MAX_INVOCATION_S * 1000:g} ms): "
            "a 40 ms stall would be lost in its variation; not measured"
        )
    prober = Prober(ctx, container.base_url)
    rounds: list[Round] = []
    try:
        with prober.connect() as sock:
            if not prober.exchange(sock):  # the first request of a connection never stalls
                raise NoKeepAlive
            while len(rounds) < ROUNDS:
                rounds.append(measure(prober, sock))
                if not rounds[-1].stalled:
                    break
    except NoKeepAlive:
        raise CheckSkipped(
            "the server closes the connection after each answer (Connection: close): no kept-alive "
            "connection to measure"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise CheckSkipped(
            f"the measurement was cut short ({type(exc).__name__}: {exc or 'no detail'}); "
            "see invocations.timely and start.healthy"
        ) from None
    ctx.evidence["rounds"] = [r.to_json() for r in rounds]
    last = rounds[-1]
    if all(r.stalled for r in rounds) and len(rounds) == ROUNDS:
        stall = statistics.median(r.kept_median - r.fresh_median for r in rounds)
        ctx.warn(
            f"requests on a kept-alive connection were {stall * 1000:.0f} ms slower than on new "
            f"connections in {ROUNDS} rounds of {PAIRS} ({'; '.join(r.describe() for r in rounds)}): "
            "the server writes the response in several small sends with Nagle on, so each answer "
            "waits for a delayed ACK. Proxies reuse connections: every invocation through one pays it. "
            f"Fix: {KEEPALIVE_FIX}"
        )
        return f"kept-alive connections stall: {last.describe()}"
    return f"no keep-alive stall: {last.describe()}"
