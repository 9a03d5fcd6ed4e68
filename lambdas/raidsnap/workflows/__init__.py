"""The workflows: the steps of each state machine, calling plan/ for decisions and aws/ for AWS."""
