"""Training: the synthetic engine (torch and compiled step kernels), the real-data loop on torch.optim, learning-rate
groups."""
