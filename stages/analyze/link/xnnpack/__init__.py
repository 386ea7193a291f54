"""Links recovered from ExecuTorch's XNNPACK graph: its XNodes' debug handles, aligned to the program's ops."""
