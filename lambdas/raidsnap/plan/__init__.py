"""Pure decisions of the workflows: no AWS client, no clock, no environment. Every function
here takes what the aws modules read and returns what the workflow should do with it."""
