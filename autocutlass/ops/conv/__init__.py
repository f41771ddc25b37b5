"""The conv2d op: ``problem`` (ConvProblem), ``frontend`` (conv2d), ``evaluation``."""
