"""Automated recovery: an EventBridge event about a failing array becomes one recovery run.

Three events start a recovery (see lib/constructs/recovery.ts for the rules):
- the array instance's ``StatusCheckFailed_AttachedEBS`` alarm going to ALARM: restore the
  latest set in replace mode on the same instance, or in attach mode onto the configured
  replacement;
- the array instance terminated, where a replacement is configured: restore onto it;
- an instance launching into the array's Auto Scaling group of one (a launch lifecycle hook
  holds it in Pending:Wait): restore onto the new instance, then CONTINUE or ABANDON.

Each event maps to one execution name, so an event delivered twice starts one recovery.
"""
