from acp_bridge.cli import main

main()
