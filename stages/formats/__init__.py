"""File formats two or more stages exchange, one module each: ETDump, ETRecord, the lowered
program and its named data, `.pt2` archives, sample files, ExecuTorch's and XNNPACK's files."""
