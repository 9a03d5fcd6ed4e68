"""The workflows' steps: each a function of its step's input (and settings) that returns the
step's output. Planning is raidsnap.plan, AWS calls are raidsnap.aws; a workflow never imports
another workflow."""
