"""Value-decomposition mixers and their registry."""
