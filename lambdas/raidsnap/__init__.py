"""raidsnap: crash-consistent snapshot sets and restores for mdadm arrays on Amazon EBS."""
