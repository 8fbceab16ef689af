"""The random-program differential tester: generated models, run on eager, torch and RETURNN."""
