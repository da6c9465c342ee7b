"""Forms of the physician workspace (workspace) and of the curator's pages (curator)."""
