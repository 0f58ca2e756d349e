"""The chain harness itself: the Python conductor's schema validation catches a malformed
envelope. (That both conductors route a real client's session, requests both ways, cancels
hop by hop and an exit is shown with acp-bridge as the proxy, in test_bridge_in_chain.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chain.harness import (
    INIT,
    VIOLATION_STATUS,
    RawChain,
    python_conductor,
    reference_proxy,
    schemas_missing,
    scripted,
)

needs_schemas = pytest.mark.skipif(schemas_missing() is not None, reason=schemas_missing() or "")


@needs_schemas
def test_python_conductor_reports_each_envelope_the_schemas_reject(tmp_path: Path) -> None:
    """A proxy whose envelopes carry `"_meta": "bad"` (the schemas want an object): the chain
    still answers, and the conductor names the fault once per schema and exits 3."""
    agent = scripted(tmp_path, {"initialize": [{"respond": {"protocolVersion": 1}}]})
    conductor = python_conductor([reference_proxy("--bad-meta"), agent], tmp_path)
    with RawChain(conductor.command) as chain:
        chain.send(INIT)
        assert chain.receive() == b'{"jsonrpc":"2.0","id":"init","result":{"protocolVersion": 1}}'
        status = chain.close()
    assert status == VIOLATION_STATUS
    meta = [line for line in conductor.violations() if "ProxySuccessorRequest" in line]
    assert meta == [f"hop 0: received envelope: ProxySuccessorRequest in {version}/schema.unstable.json at _meta: "
                    "'bad' is not of type 'object', 'null'" for version in ("v1", "v2")]
    assert len(conductor.violations()) == 4  # and ProxyRequest, whose params match neither of its forms


@needs_schemas
def test_validator_checks_envelopes_against_both_schemas() -> None:
    from tests.chain.conductor import Validator

    validator = Validator()
    good = {"jsonrpc": "2.0", "id": 7, "method": "proxy/successor", "params": {"method": "session/new", "params": {}}}
    assert validator.envelope(good) == []
    assert validator.envelope({"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": "x"}}) == []
    assert validator.envelope({"jsonrpc": "2.0", "id": 7, "result": {"anything": 1}}) == []
    no_method = {"jsonrpc": "2.0", "id": 7, "method": "proxy/successor", "params": {"params": {}}}
    assert [problem.split(" at ")[0] for problem in validator.envelope(no_method)] == [
        "ProxyRequest in v1/schema.unstable.json", "ProxyRequest in v2/schema.unstable.json",
        "ProxySuccessorRequest in v1/schema.unstable.json", "ProxySuccessorRequest in v2/schema.unstable.json"]
    scalar = {"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": "x", "params": 5}}
    assert validator.envelope(scalar) == ["proxy/successor params.params: when present, MUST be a JSON object "
                                          "or array (the definition's description)"]
    v1_init = {"jsonrpc": "2.0", "id": 1, "method": "proxy/initialize", "params": {"protocolVersion": 1}}
    assert validator.envelope(v1_init) == []
    assert validator.envelope({**v1_init, "params": {"protocolVersion": 2}}) != []  # v2's wants `info`
