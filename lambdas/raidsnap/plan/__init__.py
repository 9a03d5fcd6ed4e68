"""Pure planning: decisions made from what AWS answered, with no AWS calls of their own."""
