"""netc's execution side: eager runs, the RETURNN runner, the torch runner, parameter transfer.

Imports torch (and, for RETURNN, TensorFlow); the compiler never imports this package.
"""
