"""The `returnn-torch` target: a RETURNN config for RETURNN's PyTorch backend around the torch module."""
