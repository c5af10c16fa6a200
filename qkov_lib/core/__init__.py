"""The base every layer stands on: the chapter contract, paths, tidy results, fingerprints, the portable mode, devices,
worker processes, progress and checks."""
