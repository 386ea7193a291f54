"""What a stage keeps in memory for the later stages of the same command, and the checks that it
is unchanged: found by the sha256 of the file it was written to or read from (`written_files`),
handed out only while that file and the kept tensors' versions are as they were. Each module
wraps one format: save-and-keep and take-or-read functions the stages call."""
