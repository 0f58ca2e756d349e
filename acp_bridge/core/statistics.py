"""What `Relay.statistics()` and `Connection.statistics()` return.

Owns: the two frozen records of what is in flight. They live apart from the relay and the
session so that a run, which never asks for them, does not build their dataclasses as it
starts. Must never: hold state, or be imported by a module at its top
for anything but type checking.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionStatistics:
    """Requests still waiting for an answer, each way, responses that paired with none, and
    the ACP sessions some rule holds state for."""

    pending_to_agent: int
    pending_to_client: int
    unpaired_responses: int
    sessions: int


@dataclass(frozen=True, slots=True)
class RelayStatistics:
    """Requests still waiting for an answer, each way, and responses that paired with none."""

    pending_to_agent: int
    pending_to_client: int
    unpaired_responses: int
