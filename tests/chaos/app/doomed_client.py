"""A client that sends many slow calls and then waits to be killed (the chaos tests' victim)."""

import sys
import time
from pathlib import Path

from polybus.client.session import Session
from polybus.config import load
from polybus.token import read_token

registry, calls = sys.argv[1], int(sys.argv[2])
app = load(Path(__file__).with_name("app.toml"), ("modules.client.use.square.callstyle=async",))
session = Session(app, registry, read_token() or b"")
promises = [session.call("square", (i, 100.0), {}) for i in range(calls)]
print("sent", flush=True)
time.sleep(600)
