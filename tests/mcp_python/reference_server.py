"""A reference MCP server written with the official MCP Python SDK (PyPI `mcp`).

tests/mcp/mcp_client.rs mounts its tools with `aptix::mcp::McpToolset`, over stdio
and Streamable HTTP; `cargo run --example mcp_client` mounts them beside the
quickstart's tools.

    reference_server.py stdio
    reference_server.py http PORT

`APTIX_REF_RECORD`, when set, is a file to which `slow` appends one line
(`started`, then `finished` or `cancelled`) per call, so the test can see what
the server saw.
"""

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("aptix-reference")

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def record(line: str) -> None:
    path = os.environ.get("APTIX_REF_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


class Sum(BaseModel):
    sum: int = Field(description="a + b")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False))
def add(a: int, b: int) -> Sum:
    """Adds two integers."""
    return Sum(sum=a + b)


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message it is given."""
    raise ToolError(message)


@server.tool()
def pixel() -> Image:
    """Returns a 1x1 PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_everything(confirm: str) -> str:
    """Deletes everything (it does nothing: a tool to gate behind approval)."""
    return f"deleted ({confirm})"


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, 100 ms apart, then finishes."""
    record("started")
    try:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await asyncio.sleep(0.1)
    except BaseException:
        record("cancelled")
        raise
    record("finished")
    return f"done after {steps} steps"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool called `name` (it returns its own name) and tells the client."""

    def made() -> str:
        return name

    server.add_tool(made, name=name, description=f"A tool added at run time, called {name}.")
    await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def crash() -> str:
    """Kills the server process in the middle of the call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


class Name(BaseModel):
    name: str = Field(description="Your name")


@server.tool()
async def greet_person(ctx: Context) -> str:
    """Asks the person for their name (elicitation) and greets them."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept" and answer.data is not None:
        return f"Hello, {answer.data.name}!"
    return f"no name ({answer.action})"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
