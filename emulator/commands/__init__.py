"""What each `smlocal` subcommand does; emulator/cli.py parses the command line and calls one of these.

client.py      how a client command reaches a running server: its URL and boto3 clients
server.py      the local server's lifetime: setup (the Docker engine), serve, down
endpoints.py   one endpoint through the server: deploy, invoke, ls, logs, metrics, delete
standalone.py  commands that run on their own: check (the hosting-contract checks), demo (the SD sample)
"""
