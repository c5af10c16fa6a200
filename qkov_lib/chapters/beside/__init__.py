"""What a chapter's page and the summary share to set this book under ``official`` beside the authors' stored
numbers, where the chapter's own module cannot hold it (its code is part of stored runs' keys): Figure 2's and
Figure 4's comparisons. No chapter of its own; it imports nothing here, so a page that reads one module of it
depends on that module alone."""
