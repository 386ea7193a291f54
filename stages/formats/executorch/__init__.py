"""ExecuTorch's files: its program (.pte), its ETRecord, its delegates' processed bytes and XNNPACK's serialized graph."""
