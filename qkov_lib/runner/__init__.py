"""Running the book: papermill runs of the chapters, the book build, results bundles, publishing, notebooks for
papermill and Colab."""
