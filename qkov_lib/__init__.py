"""qkov_lib: the library behind the companion to arXiv 2608.06776 ("Faster Query-Key Learning Sharpens Attention")."""
__version__ = "0.1.0"
