"""Who may read a memory: API keys, their scopes, the key ring that every API process follows.

Pure logic (``scopes``, ``tokens``) has no I/O; ``hashing`` wraps the KDF; ``ring`` and ``writer``
are the Kafka wiring (the compacted keys topic is the truth about keys, I1).
"""
