"""Crypto-shredding: content sealed with data keys; erasing destroys the keys (docs/ERASURE.md)."""
