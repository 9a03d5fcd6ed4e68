"""Lambda entry points: one module per function, each a thin layer over the domain modules."""
