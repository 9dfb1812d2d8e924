"""The labelled turn corpus for the filter/kind classifier; see CORPUS.md."""
