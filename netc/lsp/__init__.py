"""`netc lsp`: the language server (`server`) over what it knows of a file (`analysis`)."""
