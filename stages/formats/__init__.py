"""On-disk formats two or more stages exchange: ETRecord, ETDump, lowered program."""
