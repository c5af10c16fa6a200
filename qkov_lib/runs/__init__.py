"""The runs chapters are made of: synthetic runs, fixed attention (Figure 3), real data, SQuAD, the Dask sweep."""
