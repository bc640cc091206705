"""Shared fixtures. Docker-backed fixtures live in tests/fixtures/ and are loaded as plugins."""

pytest_plugins = [
    "tests.fixtures.docker_env",
    "tests.fixtures.keepalive",
    "tests.fixtures.s3server",
    "tests.fixtures.sample",
    "tests.fixtures.smlocal_server",
    "tests.fixtures.twins",
    "tests.fixtures.stacks",
    "tests.fixtures.streaming",
]
