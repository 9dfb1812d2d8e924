"""Store adapters: the derived views the worker writes (I1: each can be dropped and replayed).

Import the adapter modules directly (``pipeline.stores.milvus_view``): re-exporting here would make
every importer of a sibling adapter pay for loading pymilvus.
"""
