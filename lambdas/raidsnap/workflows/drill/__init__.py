"""Restore drills: prove a set restores, without touching the array it came from.

A drill restores a set read-only onto a separate drill instance (the restore workflow, nested),
checks that what came up there is that array, then removes exactly what its restore created,
and reports the outcome as a metric and a notification. It never touches the source array, its
instance, its volumes or its snapshots: the restore runs in attach mode on another instance,
and teardown deletes only volumes tagged with the drill's own restore execution.

Steps: prepare, verify (discover, check), teardown (release, volumes), report; what each reads
and writes is in contracts.
"""
