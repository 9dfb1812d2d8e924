"""Derived views (I1: each can be dropped and rebuilt by replay): Milvus and the state topic.

Import the adapter modules directly (``pipeline.views.milvus``): re-exporting here would make
every importer of a sibling adapter pay for loading pymilvus.
"""
