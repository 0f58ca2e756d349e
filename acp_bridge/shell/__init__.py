"""The trio shell: everything around the pure core that does IO, for one run of the bridge.

The core decides what happens to each line; the shell moves the bytes and keeps the
processes: the agent as a child process (its stop ladder, signals, stderr), one pump per
direction and the ordered writes to each stream, the capture file and the other observers,
the bridge's own log, and every call that only a POSIX system answers (`posix`). What each
module owns: docs/how-it-works.md, "Where the code lives". Nothing here interprets
messages: that is the core's.
"""
