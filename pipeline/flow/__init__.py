"""One invocation's flow: the options settled into a plan, op names checked against the export,
the stages reused or run in order under tracking."""
