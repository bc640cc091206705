"""Shared fixtures. Docker-backed fixtures live in tests/fixtures/ and are loaded as plugins."""

pytest_plugins = [
    "tests.fixtures.client_envs",
    "tests.fixtures.docker_env",
    "tests.fixtures.keepalive",
    "tests.fixtures.s3server",
    "tests.fixtures.sample",
    "tests.fixtures.smlocal_server",
    "tests.fixtures.twins",
    "tests.fixtures.foreign_arch",
    "tests.fixtures.stacks",
    "tests.fixtures.streaming",
]

# A user's project with its own pytest settings, run by its CI script (tests/fixtures/user_project.py,
# .ci/run's "user project CI" phase), not collected as part of this suite.
collect_ignore = ["user_project"]
