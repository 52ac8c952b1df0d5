"""The Kafka seam: the only package that imports ``confluent_kafka``.

``types`` holds the plain data and client protocols the processing layer uses; ``clients`` implements
them on confluent-kafka; ``admin`` creates topics.
"""
