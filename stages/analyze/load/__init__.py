"""Load: read the ETDump, debug buffer and ETRecord, and prove they belong together."""
