"""The topic catalogue: every topic name and setting lives here and nowhere else."""

from topics.catalogue import TOPICS, TopicSpec, topic_names

__all__ = ["TOPICS", "TopicSpec", "topic_names"]
