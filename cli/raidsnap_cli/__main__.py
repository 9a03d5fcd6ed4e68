"""``python -m raidsnap_cli``."""

from .app import main

main()
