"""Configuration: the settings of one run (`model`), the TOML file that gives them (`file`, with
its `schema`), and the layers above it (`layers`: the environment and the command line).

The package's import surface is the model alone, which imports nothing of the package, so any
layer may name a setting without pulling in the file reader or the layers.
"""

from acp_bridge.config.model import IN_FILE as IN_FILE
from acp_bridge.config.model import REDACTED as REDACTED
from acp_bridge.config.model import AgentConfig as AgentConfig
from acp_bridge.config.model import CaptureConfig as CaptureConfig
from acp_bridge.config.model import CommandsConfig as CommandsConfig
from acp_bridge.config.model import Config as Config
from acp_bridge.config.model import HealthConfig as HealthConfig
from acp_bridge.config.model import RelayConfig as RelayConfig
from acp_bridge.config.model import RepairConfig as RepairConfig
from acp_bridge.config.model import RewriteConfig as RewriteConfig
from acp_bridge.config.model import RulesConfig as RulesConfig
from acp_bridge.config.model import SuggestionsConfig as SuggestionsConfig
from acp_bridge.config.model import SystemPromptConfig as SystemPromptConfig
from acp_bridge.config.model import TelemetryConfig as TelemetryConfig
from acp_bridge.config.model import command_problem as command_problem
