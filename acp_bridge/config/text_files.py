"""The small text files a configuration names: the config file itself and a system prompt
file, read whole in bounded memory.

Owns: the size limit and the decoding (UTF-8, universal newlines), and the one-line error
a prompt file that cannot be used gets. Must never: read more than the limit of any file
(a device such as /dev/zero named by mistake).
"""

from __future__ import annotations

from pathlib import Path

from acp_bridge.errors import ConfigError

# A config or system prompt file larger than this is a mistake (a device such as /dev/zero,
# a log named by accident), and reading it whole would exhaust memory.
MAX_FILE_BYTES = 16 * 1024 * 1024


def read_text_file(path: Path) -> str:
    """A UTF-8 file the user named, at most MAX_FILE_BYTES. Raises OSError (ValueError for
    an oversized file or a NUL in the name, UnicodeDecodeError for other bytes)."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    # Universal newlines, as open() in text mode would give: a prompt written on Windows
    # reaches the agent with "\n" line ends.
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def read_prompt_file(path: Path, label: str) -> str:
    """A system prompt file: UTF-8, trailing newlines dropped, not empty."""
    try:
        text = read_text_file(path)
    except IsADirectoryError:
        raise ConfigError(f"{label}: {path} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: {path} is not UTF-8: {exc}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ConfigError(f"{label}: cannot read {path}: {exc}") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise ConfigError(f"{label}: {path} is empty")
    return text
