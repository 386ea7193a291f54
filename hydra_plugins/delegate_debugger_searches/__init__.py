"""The pipeline's search sweeper plugin (`search=precision|delegation|reduce`)."""
