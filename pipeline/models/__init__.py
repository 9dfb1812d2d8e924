"""Models: sentence encoders, the turn classifier and the optional LLM extractor client."""
