"""On-disk formats two or more stages exchange (DESIGN §3): ETRecord, ETDump, lowered program."""
