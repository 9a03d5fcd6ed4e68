"""A local stand-in for the AWS that raidsnap drives: moto plus a double that fills moto's gaps."""
