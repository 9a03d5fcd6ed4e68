"""raidsnap's command line: snapshot sets, backups, restores and executions, on AWS or on the
local emulation."""
