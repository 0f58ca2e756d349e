"""A dry run: the agent may read files through the client, but not write them.

When the agent asks the client to write a file (`fs/write_text_file`), the request never
reaches the client: the bridge answers the agent itself with a JSON-RPC error, so the agent
goes on (and usually says it could not write). The outcome that does this is `DROP` with a
message the bridge sends in the other direction: `Replace(None, then=(Emit(...),))`.

Use:   acp-bridge run --rule configs/rules/read_only_fs.py -- my-agent
"""

from acp_bridge.rules import PASS, Direction, Emit, Message, Outcome, Replace, Rule, SessionFacts


class ReadOnlyFs(Rule):
    """Before (agent -> client): {"id":7,"method":"fs/write_text_file","params":{...}}
    After:  nothing to the client; to the agent: {"id":7,"error":{"code":-32000,"message":...}}"""

    name = "read-only-fs"

    def request(self, msg: Message, session: SessionFacts) -> Outcome:
        if msg.direction is not Direction.TO_CLIENT or msg.method != "fs/write_text_file":
            return PASS
        path = msg.params.get("path") if isinstance(msg.params, dict) else None
        answer = {"jsonrpc": "2.0", "id": msg.id,
                  "error": {"code": -32000, "message": f"read-only session: not writing {path}"}}
        return Replace(None, then=(Emit(Direction.TO_AGENT, answer),))


rules = [ReadOnlyFs()]
