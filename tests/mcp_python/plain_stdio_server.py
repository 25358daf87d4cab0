"""A minimal MCP server over stdio in plain Python (no SDK, the standard
library only), for tests/mcp/mcp_hostile.rs: what a child process started with
`McpToolset::stdio` can do that an in-process server cannot.

    plain_stdio_server.py [--flood-stderr BYTES] [--banner] [--spawn-child PIDFILE]
                          [any other arguments]

It lists two tools: `echo`, which answers its arguments as text, and
`crash`, which writes why to stderr and exits (as a server whose upstream
refused it may). With `--flood-stderr BYTES` it first writes BYTES bytes to
stderr without a newline; with `--banner` it first writes a line naming
its arguments to stderr, as many servers do when they start. With
`--spawn-child PIDFILE` it starts a child of its own that outlives it
unless killed (as `npx` and `uvx` start the real server), and writes
"SERVER_PID CHILD_PID" to PIDFILE. Other arguments (a key on the command
line, say) are ignored.
"""

import json
import os
import subprocess
import sys


def main():
    args = sys.argv[1:]
    if "--banner" in args:
        sys.stderr.write("plain-mcp starting: argv=%s\n" % " ".join(args))
        sys.stderr.flush()
    if "--spawn-child" in args:
        pidfile = args[args.index("--spawn-child") + 1]
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(pidfile + ".tmp", "w") as out:
            out.write("%d %d" % (os.getpid(), child.pid))
        os.replace(pidfile + ".tmp", pidfile)
    if "--flood-stderr" in args:
        remaining = int(args[args.index("--flood-stderr") + 1])
        chunk = b"x" * (1 << 16)
        while remaining > 0:
            piece = chunk[: min(remaining, len(chunk))]
            sys.stderr.buffer.write(piece)
            remaining -= len(piece)
        sys.stderr.buffer.flush()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        if "id" not in message or method is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "plain", "version": "0.0.0"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {
                        "name": "echo",
                        "description": "Answers its arguments.",
                        "inputSchema": {
                            "type": "object",
                            "properties": {"text": {"type": "string"}},
                        },
                    },
                    {
                        "name": "crash",
                        "description": "Fails upstream, and exits.",
                        "inputSchema": {"type": "object", "properties": {}},
                    },
                ]
            }
        elif method == "tools/call" and message.get("params", {}).get("name") == "crash":
            sys.stderr.write("upstream said 401 for %s; exiting\n" % " ".join(args))
            sys.stderr.flush()
            sys.exit(1)
        elif method == "tools/call":
            text = json.dumps(message.get("params", {}).get("arguments", {}))
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "ping":
            result = {}
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "method not found"},
            }
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
            continue
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
