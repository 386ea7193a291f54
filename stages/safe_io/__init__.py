"""Reading and writing files safely: atomic writes, bounded zips, checked flatbuffers,
weights-only tensor files, and each file's sha256 taken once per process."""
